"""``perfgate nightly``: which cases the stored comparison hands to the A/B, and the A/B deciding
the night in a throwaway git repository timed on a virtual clock (test_cli_ab's project)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import test_cli_ab
from helpers import AB_CLOCK as CLOCK
from helpers import commit, error_line, git, perfgate, rounds_at, worktrees

from perfgate.cli.nightly import failing_tests, undecided
from perfgate.stats import compare_samples
from perfgate.verdict import Verdict
from perfgate.verdict.nightly import ab_reason
from perfgate.verdict.outcome import GateResult
from perfgate.verdict.rows import from_json

repo = test_cli_ab.repo  # the throwaway git project, as a fixture of this module too
WORK = "perf_tests/test_work.py::test_work"
IDLE = "perf_tests/test_idle.py::test_idle"
IDLE_BENCHMARK = """
def test_idle(benchmark):
    benchmark.pedantic(lambda: None, rounds=3, iterations=1, warmup_rounds=0)
"""


def row(name: str = WORK, verdict: str = "unchanged", change: float | None = 0.2, **extra):
    gated = verdict in ("regression", "unconfirmed", "improvement", "unchanged")
    fields = dict(name=name, verdict=verdict, gated=gated, message=f"{verdict} message",
                  change_percent=change, threshold=0.02, threshold_source="floor 2%")  # fmt: skip
    return fields | extra


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({}, None),
        ({"verdict": "new", "change": None}, None),
        ({"verdict": "not run", "change": None}, None),
        ({"verdict": "improvement", "change": -8.0}, None),
        ({"verdict": "regression", "change": 12.0}, "stored comparison: regression"),
        ({"verdict": "unconfirmed", "change": 4.0}, "stored comparison: unconfirmed"),
        ({"verdict": "not gated"}, "stored comparison not gated message"),
        ({"clocks": "power-limited: the baseline ran 9 of 10 rounds"}, "power-limited: the base"),
        ({"change": 1.4}, "stored comparison +1.4% (screen 1%)"),
        ({"threshold": 0.10, "threshold_source": "floor 10%"}, "stored threshold 10.0% is looser"),
        ({"threshold": 0.50, "threshold_source": "marker"}, None),  # the test's own rule
    ],
)
def test_what_goes_to_the_ab(fields, reason):
    (typed,) = from_json([row(**fields)])  # a gate.json of format 0, read as today's rows
    got = ab_reason(typed, screen=0.01, target=0.03)
    assert got == reason if reason is None else got.startswith(reason), got


def write_gate(results: Path, *rows: dict) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "gate.json").write_text(json.dumps(list(rows)))


def nightly(results: Path, *argv: str) -> tuple[int, str, str]:
    return perfgate("nightly", "--results", str(results), "--confirm-only", "--blocks", "3",
                    *argv, "--", CLOCK)  # fmt: skip


def write_baseline(path: Path, commit_id: str) -> None:
    run = {"commit_info": {"id": commit_id}, "benchmarks": [], "machine_info": {}}
    path.write_text(json.dumps(run | {"datetime": "2026-11-24T00:00:00"}))


def verdicts(results: Path) -> dict[str, dict]:
    data = json.loads((results / "nightly-verdicts.json").read_text())
    return {case["name"]: case for case in data["cases"]}


def test_a_real_slowdown_flagged_by_the_stored_comparison_is_confirmed_by_the_ab(repo, tmp_path):
    (repo / "cost.txt").write_text("0.0011")  # 10 % slower: clear of the +-2 % per-call noise
    commit(repo, "10 % slower")
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=10.2))
    status, out, _ = nightly(results, "--base-ref", "HEAD~1")
    assert status == 1, out
    case = verdicts(results)[WORK]
    assert case["verdict"] == "regression" and case["decided_by"] == "A/B"
    assert case["why_ab"] == "stored comparison: unconfirmed"
    assert "| test_work | regression | A/B | unconfirmed +10.2% | regression +" in out
    assert (results / "nightly.md").read_text().startswith("# perfgate nightly")
    assert worktrees(repo) == 1


def test_drift_in_the_stored_comparison_does_not_fail_the_night(repo, tmp_path):
    # the stored comparison saw +6 % (another session, another clock); the A/B sees none
    (repo / "README").write_text("docs only")
    commit(repo, "docs")
    (repo / "perf_tests" / "test_idle.py").write_text(IDLE_BENCHMARK)  # B only: a new case
    results = tmp_path / "results"
    write_gate(results, row(verdict="regression", change=6.0), row(IDLE, "new", None))
    status, out, _ = nightly(results, "--base-ref", "HEAD~1")
    assert status == 0, out
    cases = verdicts(results)
    assert cases[WORK]["verdict"] == "unchanged" and cases[WORK]["decided_by"] == "A/B"
    assert cases[IDLE]["verdict"] == "new" and cases[IDLE]["decided_by"] is None
    assert "Decided by the stored comparison: 0; by an interleaved A/B against" in out


def test_without_candidates_the_stored_comparison_decides_and_no_ab_runs(repo, tmp_path):
    results = tmp_path / "results"
    write_gate(results, row(change=0.3))
    status, out, _ = nightly(results)  # no --base-ref and no baseline: not needed
    assert status == 0, out
    assert verdicts(results)[WORK]["decided_by"] == "stored comparison"
    assert not (results / "ab.json").exists()


def test_a_is_the_baseline_runs_commit(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    baseline = tmp_path / "0001_base.json"
    write_baseline(baseline, base)
    results = tmp_path / "results"
    write_gate(results, row(verdict="not gated", change=90.0))
    status, out, _ = nightly(results, "--baseline", str(baseline))
    assert status == 1, out
    assert json.loads((results / "ab.json").read_text())["base_commit"] == base


def test_a_baseline_commit_missing_from_the_clone_is_one_line(repo, tmp_path):
    baseline = tmp_path / "0001_base.json"
    write_baseline(baseline, "0" * 40)
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=5.0))
    status, _, err = nightly(results, "--baseline", str(baseline))
    assert status == 2
    assert "the baseline's commit 000000000000 is not in" in error_line(err, "nightly")


def test_missing_gate_json_is_one_line(repo, tmp_path):
    status, _, err = nightly(tmp_path / "empty")
    assert status == 2 and "gate.json is missing" in error_line(err, "nightly")


def test_a_stored_comparison_that_cannot_run_stops_the_night_with_its_status(repo, tmp_path):
    # the project has no baseline: the gate cannot run (6), and nothing is confirmed
    status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"))
    assert status == 6 and "the stored comparison exited 6" in err


def test_failing_tests_are_read_from_junit(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite failures="1" errors="1"/></testsuites>')
    assert failing_tests(junit) == 2 and failing_tests(tmp_path / "none.xml") == 0


def test_the_whole_night_stored_comparison_then_ab_against_the_baselines_commit(repo, tmp_path):
    # the baseline is saved at the first commit; a commit makes the case 50 % slower; the night
    # compares with the stored baseline, hands the flagged case to the A/B against the commit
    # the baseline recorded (commit_info), which confirms it
    saved = pytest_run(repo, "perf_tests", "--benchmark-save=base", "--benchmark-save-data", CLOCK)
    assert saved.returncode == 0, saved.stdout
    commit(repo, "the baseline")  # baselines/ is part of the tree; A's commit is the one before
    (repo / "cost.txt").write_text("0.0015")
    commit(repo, "50 % slower")
    results = tmp_path / "results"
    status, out, err = perfgate("nightly", "--results", str(results), "--blocks", "3", "--", CLOCK)
    assert status == 1, out + err
    case = verdicts(results)[WORK]
    assert case["verdict"] == "regression" and case["decided_by"] == "A/B"
    assert case["why_ab"].startswith("stored comparison: ")  # flagged there first
    assert (results / "gate.md").is_file() and (results / "nightly.json").is_file()
    base = json.loads((results / "ab.json").read_text())["base_commit"]
    assert base == git(repo, "rev-parse", "HEAD~2").strip()


def pytest_run(root: Path, *argv: str):
    import subprocess
    import sys

    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *argv]
    # not an xdist worker's variables: pytest-benchmark would take the session for a worker
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)


def test_screen_and_target_given_in_percent_send_every_gated_case_to_the_ab(repo, tmp_path):
    results = tmp_path / "results"
    write_gate(results, row(change=0.3))  # 0.3 % slower: below the default 1 % screen
    status, out, err = nightly(results, "--base-ref", "HEAD", "--screen=0%", "--target", "5%")
    assert status == 0, out + err
    data = json.loads((results / "nightly-verdicts.json").read_text())
    assert (data["screen"], data["target"]) == (0.0, 0.05)
    case = verdicts(results)[WORK]
    assert case["decided_by"] == "A/B" and case["why_ab"].startswith("stored comparison +0.3%")


def test_more_blocks_below_zero_is_one_line(repo, tmp_path):
    write_gate(tmp_path / "results", row())
    status, _, err = nightly(tmp_path / "results", "--more-blocks", "-1")
    assert status == 2 and "--more-blocks -1: 0 or more" in error_line(err, "nightly")


def test_the_ab_runs_more_blocks_only_for_the_cases_it_left_undecided():
    slower = compare_samples(rounds_at(1.0, 0), rounds_at(1.04, 1))
    results = [
        GateResult("a", Verdict.NOT_GATED, "not gated: slower by 4 %, not significant", slower),
        GateResult(
            "b", Verdict.NOT_GATED, "not gated: 1 block pairs, needs 2"
        ),  # nothing to add to
        GateResult("c", Verdict.REGRESSION, "slower by 4 %", slower),
        GateResult("d", Verdict.UNCHANGED, "median ...", slower),
    ]
    assert undecided(results) == ["a"]
