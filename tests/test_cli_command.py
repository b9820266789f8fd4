"""The command line's shape: one table of commands, one error convention, the options the plugin
and the commands share declared once and checked at the door, the store's root found by the
plugin's rule from the project's own configuration, and git and pytest run as children in one
place (``perfgate.ab.children``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from helpers import commit, perfgate, refused_at_the_door

from perfgate import arguments
from perfgate.ab import AbError, children
from perfgate.ab.children import environment, git
from perfgate.cli import COMMANDS, build_parser, project
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import PYTEST_BENCHMARK_STORAGE, StoreRoot, store_root
from perfgate.verdict.thresholds import ThresholdSpec


# --- one table, one error convention ---------------------------------------------------------
def test_each_command_of_the_table_is_parsed_into_itself():
    parser = build_parser()
    for command in COMMANDS:
        argv = {"history": ["x"], "profile": ["t::x"], "ab": ["HEAD"], "dashboard": ["--out=d"],
                "bisect": ["A", "B", "-k", "x"], "merge": ["s.json", "--out=m.json"],
                "comment": ["gate.json"]}  # fmt: skip
        assert parser.parse_args([command.name, *argv.get(command.name, [])]).handler is command


@pytest.fixture
def failing(monkeypatch):
    """A command of the table that raises what it is given."""

    class Failing(Command):
        name, summary = "failing", "raises"
        raised: BaseException | None = None

        @classmethod
        def run(cls, args, out, err) -> int:
            raise cls.raised

    monkeypatch.setattr("perfgate.cli.COMMANDS", (*COMMANDS, Failing))
    return Failing


@pytest.mark.parametrize(
    "raised, status, line",
    [
        (CommandError("name another run"), 2, "perfgate failing: error: name another run"),
        (CommandError("not one run", 3, "refused"), 3, "perfgate failing: refused: not one run"),
        (KeyboardInterrupt(), 130, "perfgate failing: interrupted; nothing was left half-written"),
    ],
)
def test_a_command_fails_in_one_line_with_its_status(failing, raised, status, line):
    failing.raised = raised
    assert perfgate("failing") == (status, "", line + "\n")


def test_pytest_arguments_are_refused_where_a_command_takes_none(capsys):
    with pytest.raises(SystemExit):
        perfgate("compare", "--", "-k", "x")
    assert "arguments after -- go to pytest, for `perfgate profile`" in capsys.readouterr().err


# --- options declared once, checked at the door --------------------------------------------
def test_the_plugin_and_the_commands_parse_a_threshold_alike(pytester):
    config = pytester.parseconfig("-p", "perfgate.plugin", "--perf-gate-threshold=Sdpa=150%")
    parser = argparse.ArgumentParser()
    arguments.add_thresholds(parser.add_argument, "--threshold", "")
    given = parser.parse_args(["--threshold=Sdpa=150%"]).threshold
    assert config.option.perf_gate_threshold == given == [ThresholdSpec.parse("sdpa=150%")]
    assert [str(spec) for spec in given] == ["sdpa=150%"]  # passed on as written (lower case)


@pytest.mark.parametrize(
    "argv, line",
    [
        (["compare", "--alpha", "1.5"], "argument --alpha: '1.5': a significance level"),
        (["nightly", "--target", "3"], "threshold '3' is ambiguous: write 3% or 0.03"),
        (["bisect", "A", "B", "-k", "x", "--threshold=-1%"], "a percentage of 0 or more"),
        (["ab", "HEAD", "--blocks", "x"], "argument --blocks: 'x': give a whole number, 3 or"),
    ],
)
def test_a_value_that_cannot_work_stops_the_command_before_it_starts(capsys, argv, line):
    assert line in refused_at_the_door(capsys, *argv)


# --- the store's root: the plugin's rule, from the project's configuration --------------------
INI_FILES = {
    "pytest.ini": "[pytest]\nperfgate_baselines = perf/store\n",
    "pyproject.toml": '[tool.pytest.ini_options]\nperfgate_baselines = "perf/store"\n',
    "tox.ini": "[tox]\nenvlist = x\n\n[pytest]\nperfgate_baselines = perf/store\n",
    "setup.cfg": "[tool:pytest]\nperfgate_baselines = perf/store\n",
}


@pytest.mark.parametrize("name", INI_FILES)
def test_the_store_root_is_the_projects_configured_one(tmp_path, monkeypatch, name):
    (tmp_path / name).write_text(INI_FILES[name])
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # from a folder below the ini file, as pytest finds it
    assert store_root(None) == StoreRoot((tmp_path / "perf/store").resolve())
    assert store_root("elsewhere").path == Path("elsewhere")  # --baselines wins


def test_without_a_configured_root_the_store_is_pytest_benchmarks_own(tmp_path, monkeypatch):
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = x\n")  # no [pytest]: not the ini file
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(tmp_path)
    assert project.ini_file() is None
    root = store_root(None)
    assert root.path == PYTEST_BENCHMARK_STORAGE.resolve() and not root.per_hardware


def test_pytest_ini_is_the_ini_file_even_without_a_section(tmp_path, monkeypatch):
    (tmp_path / "pytest.ini").write_text("")
    (tmp_path / "tox.ini").write_text("[pytest]\nperfgate_baselines = b\n")  # found after it
    monkeypatch.chdir(tmp_path)
    assert project.ini_file() == (tmp_path / "pytest.ini", {})
    assert not store_root(None).per_hardware


# --- git and pytest as children ----------------------------------------------------------------
def test_a_failing_git_command_is_one_line_naming_it(tmp_path):
    with pytest.raises(AbError, match=r"^git rev-parse --show-toplevel failed: fatal: .*not a git"):
        git(tmp_path, "rev-parse", "--show-toplevel")


def test_a_worktree_added_is_removed_and_git_forgets_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("a file to commit\n")
    commit(repo, "first")
    head = children.commit_of(repo, "HEAD")
    tree = children.add_worktree(repo, tmp_path / "tree", head)
    assert git(tree, "rev-parse", "HEAD") == head
    assert children.remove_worktree(repo, tree)
    assert not tree.exists() and git(repo, "worktree", "list").count("\n") == 0
    assert children.commit_of(repo, "no-such-ref") is None


def test_a_child_pytest_is_never_an_xdist_worker(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    env = environment(tmp_path)
    assert "PYTEST_XDIST_WORKER" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)  # the tree under test first
