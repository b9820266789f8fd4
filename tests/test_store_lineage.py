"""A baseline every checkout can A/B against: a run whose commit is not in the repository's
history (not an ancestor of HEAD: a rebased or deleted branch's) is never saved as a baseline,
neither by ``--benchmark-save`` (kept in perfgate-results/unsaved/) nor by ``perfgate merge
--save``; a shallow clone is named only where git says the clone is shallow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import git, perfgate, run, shard_run

from perfgate.store import lineage


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose main holds commits 0 and 1, and a commit of a deleted branch: (the
    repository, main's first commit, the deleted branch's commit)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("0")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "0")
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "side")
    git(repo, "commit", "-q", "--allow-empty", "-m", "side")
    side = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "1")
    git(repo, "branch", "-q", "-D", "side")
    return repo, first, side


def test_a_commit_off_heads_history_is_named_and_a_shallow_clone_only_when_so(history, tmp_path):
    repo, first, side = history
    assert lineage.not_in_history(first, repo) is None
    for commit in (side, "f" * 40):  # a rebased branch's commit; one the clone never had
        reason = lineage.not_in_history(commit, repo)
        assert f"{commit[:12]} is not in this repository's history" in reason
        assert "shallow" not in reason and "\n" not in reason
    assert lineage.not_in_history(None, repo) is None  # nothing to check
    assert lineage.not_in_history(side, tmp_path) is None  # no repository to check against
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    assert "this clone is shallow" in lineage.not_in_history(first, clone)


def test_merge_save_refuses_a_run_of_a_commit_off_heads_history(history, monkeypatch):
    repo, first, side = history
    monkeypatch.chdir(repo)
    for index in (1, 2):
        run_json = shard_run(index, 2, [f"c{index}"], commit=side)
        (repo / f"s{index}.json").write_text(json.dumps(run_json))
    status, out, err = perfgate("merge", "s1.json", "s2.json", "--save", "m",
                                "--baselines", "baselines")  # fmt: skip
    assert status == 2 and err.count("\n") == 1 and out == "", err
    assert f"not saved: its commit {side[:12]} is not in this repository's history" in err
    assert not (repo / "baselines").exists()
    for index in (1, 2):
        run_json = shard_run(index, 2, [f"c{index}"], commit=first)
        (repo / f"s{index}.json").write_text(json.dumps(run_json))
    status, out, err = perfgate("merge", "s1.json", "s2.json", "--save", "m",
                                "--baselines", "baselines")  # fmt: skip
    assert status == 0 and "0001_m.json" in out, err


def test_benchmark_save_keeps_a_run_of_a_commit_off_heads_history_aside(bench_project):
    repo = bench_project.path
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "0")
    bench_project.makeconftest("""
        def pytest_benchmark_generate_commit_info(config):
            return {"id": "f" * 40, "dirty": False, "project": "p", "branch": "gone"}
    """)  # fmt: skip
    result = run(bench_project, "--benchmark-save=rebased")
    output = result.stdout.str() + result.stderr.str()
    assert "NOT saved as a baseline: its commit ffffffffffff is not in this repository's " \
           "history" in output, output  # fmt: skip
    assert list((repo / "perfgate-results" / "unsaved").glob("*_rebased.json"))
    assert not list(repo.glob(".benchmarks/**/*_rebased.json"))
