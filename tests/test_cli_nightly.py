"""``perfgate nightly``: which cases the stored comparison hands to the A/B, and the A/B deciding
the night in a throwaway git repository timed on a virtual clock (conftest's ``repo``)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from helpers import AB_CLOCK as CLOCK
from helpers import (
    LOAD_PLUGIN,
    children_import_this_checkout,
    commit,
    error_line,
    git,
    perfgate,
    refused_at_the_door,
    rounds_at,
    worktrees,
)

from perfgate.ab import blocks
from perfgate.ab.engine import Engine, undecided
from perfgate.ab.night import failing_tests
from perfgate.stats import compare_samples
from perfgate.verdict import Verdict
from perfgate.verdict.nightly import ab_reason
from perfgate.verdict.outcome import GateResult
from perfgate.verdict.paired import compare_paired_blocks
from perfgate.verdict.rows import from_json

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
        ({"verdict": "improvement", "change": -8.0}, "stored comparison -8.0% (screen 1% either"),
        ({"verdict": "improvement", "change": -0.8}, None),
        ({"verdict": "regression", "change": 12.0}, "stored comparison: regression"),
        ({"verdict": "unconfirmed", "change": 4.0}, "stored comparison: unconfirmed"),
        ({"verdict": "not gated"}, "stored comparison not gated message"),
        ({"clocks": "power-limited: the baseline ran 9 of 10 rounds"}, "power-limited: the base"),
        ({"change": 1.4}, "stored comparison +1.4% (screen 1% either way)"),
        ({"change": -5.7}, "stored comparison -5.7% (screen 1% either way)"),
        ({"threshold": 0.10, "threshold_source": "floor 10%"}, "stored threshold 10.0% is looser"),
        (
            {
                "threshold": 0.10,
                "threshold_source": "floor 10%",
                "ratio_low": 0.99,
                "ratio_high": 1.02,
            },
            "stored threshold 10.0% is looser",
        ),  # may hide 3 %: to the A/B
        (
            {
                "threshold": 0.10,
                "threshold_source": "floor 10%",
                "ratio_low": 0.99,
                "ratio_high": 1.01,
            },
            None,
        ),  # rules out even half the 3 % target: decided stored
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
    return {case["name"]: case for case in data["rows"]}


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
    line = error_line(err, "nightly")
    assert "the baseline's commit 000000000000 (0001_base.json) is not in this repository's " \
           "history; give --base-ref REF" in line  # fmt: skip
    assert "promote a baseline run of a commit on the main line" in line
    assert "shallow" not in line  # a full clone: the advice to fetch more would not help


def test_a_missing_baseline_commit_names_a_shallow_clone_and_prints_the_runs_note(
    repo, tmp_path, monkeypatch
):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    monkeypatch.chdir(clone)
    baseline = tmp_path / "0001_base.json"
    write_baseline(baseline, "0" * 40)
    (tmp_path / "0001_base.note").write_text(
        "Recorded on a rebased branch;\nits code is on "
        "main as abc1234: \x1b[31m--base-ref abc1234\n"
    )
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=5.0))
    status, _, err = nightly(results, "--baseline", str(baseline))
    assert status == 2
    line = error_line(err, "nightly")
    assert "is not in this repository's history (this clone is shallow: fetch its full " \
           "history, fetch-depth: 0)" in line  # fmt: skip
    assert "its note: Recorded on a rebased branch; its code is on main as abc1234: " \
           "\\x1b[31m--base-ref abc1234; give --base-ref REF" in line  # fmt: skip


def test_missing_gate_json_is_one_line(repo, tmp_path):
    status, _, err = nightly(tmp_path / "empty")
    assert status == 2 and "gate.json is missing" in error_line(err, "nightly")


def test_a_stored_comparison_that_cannot_run_stops_the_night_with_its_status(
    repo, tmp_path, monkeypatch
):
    # the project has no baseline: the gate cannot run (6), and nothing is confirmed
    children_import_this_checkout(monkeypatch)
    status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"), "--", *LOAD_PLUGIN)
    assert status == 6 and "the stored comparison exited 6" in err


def test_the_stored_comparisons_command_pastes_into_a_shell_as_the_exact_node_ids(
    repo, tmp_path, monkeypatch
):
    children_import_this_checkout(monkeypatch)
    case = "perf_tests/test_work.py::test_work[a b-1]"  # no such case: pytest stops at once
    status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"), "--tests", case, "--",
                              *LOAD_PLUGIN)  # fmt: skip
    [line] = [line for line in err.splitlines() if line.startswith("stored comparison: ")]
    command = shlex.split(line.removeprefix("stored comparison: "))
    assert command[:2] == ["pytest", case] and status not in (0, 1), err


def test_failing_tests_are_read_from_junit(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite failures="1" errors="1"/></testsuites>')
    assert failing_tests(junit) == 2 and failing_tests(tmp_path / "none.xml") == 0


def test_the_whole_night_stored_comparison_then_ab_against_the_baselines_commit(
    repo, tmp_path, monkeypatch
):
    # the baseline is saved at the first commit; a commit makes the case 50 % slower; the night
    # compares with the stored baseline, hands the flagged case to the A/B against the commit
    # the baseline recorded (commit_info), which confirms it
    saved = pytest_run(repo, "perf_tests", "--benchmark-save=base", "--benchmark-save-data", CLOCK)
    assert saved.returncode == 0, saved.stdout
    commit(repo, "the baseline")  # baselines/ is part of the tree; A's commit is the one before
    (repo / "cost.txt").write_text("0.0015")
    commit(repo, "50 % slower")
    results = tmp_path / "results"
    children_import_this_checkout(monkeypatch)  # the stored comparison's pytest loads it
    status, out, err = perfgate("nightly", "--results", str(results), "--blocks", "3", "--", CLOCK,
                                *LOAD_PLUGIN)  # fmt: skip
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
    (repo / "README").write_text("docs only")
    commit(repo, "docs")
    results = tmp_path / "results"
    write_gate(results, row(change=0.3))  # 0.3 % slower: below the default 1 % screen
    status, out, err = nightly(results, "--base-ref", "HEAD~1", "--screen=0%", "--target", "5%")
    assert status == 0, out + err
    data = json.loads((results / "nightly-verdicts.json").read_text())
    assert (data["screen"], data["target"]) == (0.0, 0.05)
    case = verdicts(results)[WORK]
    assert case["decided_by"] == "A/B" and case["why_ab"].startswith("stored comparison +0.3%")


def test_more_blocks_below_zero_is_refused_before_anything_runs(repo, tmp_path, capsys):
    line = refused_at_the_door(capsys, "nightly", "--confirm-only", "--more-blocks", "-1")
    assert "argument --more-blocks: '-1': give a whole number, 0 or more" in line


def test_the_ab_runs_more_blocks_only_for_the_cases_it_left_undecided():
    slower = compare_samples(rounds_at(1.0, 0), rounds_at(1.04, 1))
    results = [
        GateResult(
            "a",
            Verdict.UNDECIDED,
            "undecided: slower by 4 %, not significant",
            slower,
            threshold=0.03,
        ),  # fmt: skip
        GateResult("b", Verdict.UNDECIDED, "undecided: 1 block pairs, needs 3"),  # nothing to add
        GateResult("c", Verdict.REGRESSION, "slower by 4 %", slower, threshold=0.03),
        GateResult("d", Verdict.UNCHANGED, "median ...", slower, threshold=0.03),
        GateResult("e", Verdict.NOT_GATED, "not gated: host-bound", slower, threshold=0.03),
    ]
    assert undecided(results, 3) == ["a"]


def test_a_case_whose_blocks_scatter_far_past_its_threshold_gets_no_more_blocks():
    """+-30 % blocks cannot show 3 % in a few more pairs: the A/B leaves them undecided rather
    than spend the night on them; +-1 % blocks get their pairs."""
    wide = compare_paired_blocks([1.0, 1.3, 0.8], [1.2, 1.0, 1.1])
    narrow = compare_paired_blocks([1.0, 1.01, 0.99], [1.035, 1.03, 1.05])
    results = [GateResult(name, Verdict.UNDECIDED, "undecided", c, threshold=0.03)
               for name, c in (("wide", wide), ("narrow", narrow))]  # fmt: skip
    assert undecided(results, 7) == ["narrow"]


# --- issue 33: every input checked before any work, one line, a documented exit status --------
@pytest.mark.parametrize("rows", [[], [row(verdict="not run", change=None)]])
def test_a_night_that_gated_nothing_cannot_pass(repo, tmp_path, rows):
    results = tmp_path / "results"
    write_gate(results, *rows)
    status, _, err = nightly(results)
    assert status == 6 and "no case was decided" in err


def test_check_names_itself_in_what_it_says(repo, tmp_path):
    # `perfgate check` is the nightly under another name: its lines, its page and its resume
    # hint name the command the user ran, not "nightly"
    results = tmp_path / "results"
    write_gate(results)
    status, out, err = perfgate("check", "--results", str(results), "--confirm-only",
                                "--blocks", "3", "--", CLOCK)  # fmt: skip
    assert status == 6 and err.strip().startswith("perfgate check: no case was decided")
    assert "perfgate nightly" not in err + out
    assert (results / "nightly.md").read_text().startswith("# perfgate check\n")


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"verdict": None}, "not a valid Verdict"),
        ({"change_percent": "5"}, "change_percent must be a finite number"),
        ({"name": ["a", "b"]}, "name must be text"),
        ({"verdict": 5}, "5 is not a valid Verdict"),
    ],
)
def test_a_broken_gate_json_is_one_line_before_any_block(repo, tmp_path, bad, words):
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=5.0) | bad)
    status, _, err = nightly(results, "--base-ref", "HEAD~1")
    assert status == 2 and words in error_line(err, "nightly")
    assert worktrees(repo) == 1 and not (results / "ab-blocks").exists()


def test_a_base_that_is_the_tree_under_test_is_refused_before_the_stored_comparison(repo, tmp_path):
    # issue 33: --base-ref HEAD ran an A/A that overrode a confirmed +28.4 % regression
    status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"), "--base-ref", "HEAD")
    assert status == 2 and "is the tree under test" in error_line(err, "nightly")
    assert not (tmp_path / "r" / "gate.json").exists()  # no stored comparison ran


@pytest.mark.parametrize("argv", [["--screen", "nan"], ["--screen=-1"], ["--target", "nan"],
                                  ["--target=-5%"]])  # fmt: skip
def test_a_screen_or_target_that_is_no_fraction_is_refused_at_once(argv, capsys):
    from perfgate.cli import build_parser

    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["nightly", *argv])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "of 0 or more" in err and "Traceback" not in err


def test_a_target_past_100_percent_is_a_target(repo, tmp_path):
    (repo / "cost.txt").write_text("0.003")  # three times the cost: 200 % slower
    commit(repo, "three times the cost")
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=200.0))
    status, out, err = nightly(results, "--base-ref", "HEAD~1", "--target", "150%")
    assert status == 1, out + err
    assert verdicts(results)[WORK]["verdict"] == "regression"


def test_thousands_of_cases_sent_to_the_ab_are_no_argument_list(repo, tmp_path):
    # issue 33: every name went into one -k ("Argument list too long"); now node ids, in the
    # block process itself. The names no tree collects are not run in both trees.
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    results = tmp_path / "results"
    others = [row(f"perf_tests/test_gone.py::test_gone[{i:04d}-{'x' * 40}]", "unconfirmed", 5.0)
              for i in range(3000)]  # fmt: skip
    write_gate(results, row(verdict="unconfirmed", change=100.0), *others)
    status, out, err = nightly(results, "--base-ref", "HEAD~1")
    assert status == 1, err[-2000:]
    cases = verdicts(results)
    assert cases[WORK]["verdict"] == "regression" and len(cases) == 3001
    assert cases[others[0]["name"]]["message"].startswith("not gated: the A/B did not run it")


# --- issue 31: nothing lost; --resume ----------------------------------------------------------
RUN_BLOCK = blocks.run_block


def counting_blocks(monkeypatch, stop_after: int | None = None) -> list:
    """Count the blocks run; raise KeyboardInterrupt instead of the ``stop_after + 1``-th."""
    ran, original = [], RUN_BLOCK

    def run_block(process, names, pytest_args, report, log):
        if stop_after is not None and len(ran) == stop_after:
            raise KeyboardInterrupt
        ran.append(report.name)
        return original(process, names, pytest_args, report, log)

    monkeypatch.setattr(blocks, "run_block", run_block)  # replaces an earlier counter too
    return ran


def test_an_interrupted_night_keeps_its_blocks_and_resume_finishes_it(repo, tmp_path, monkeypatch):
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=100.0))
    first = counting_blocks(monkeypatch, stop_after=2)  # after one complete block pair
    status, out, err = nightly(results, "--base-ref", "HEAD~1")
    assert status == 130 and "--resume continues" in err
    night = json.loads((results / "nightly-verdicts.json").read_text())
    assert night["stopped"] == "interrupted" and night["remaining"] == [WORK]
    assert "The A/B stopped (interrupted)" in (results / "nightly.md").read_text()
    again = counting_blocks(monkeypatch)
    status, out, err = perfgate("nightly", "--results", str(results), "--resume", "--blocks", "3",
                                "--base-ref", "HEAD~1", "--", CLOCK)  # fmt: skip
    assert status == 1, out + err
    assert verdicts(results)[WORK]["verdict"] == "regression"
    assert len(first) == 2 and len(again) == 4 and not set(first) & set(again)
    ab = json.loads((results / "ab.json").read_text())
    assert ab["complete"] and ab["rows"][0]["pairs"] == 3


def test_a_time_limited_night_says_what_remains_and_exits_75(repo, tmp_path, monkeypatch):
    (repo / "README").write_text("docs only")
    commit(repo, "docs")
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=4.0))
    # blocks that take 10 s each by the engine's pace: no pair can end within the second given,
    # whatever this machine's load (a fast machine once decided the case before the limit)
    with monkeypatch.context() as patched:
        patched.setattr(Engine, "_pace", lambda self: 10.0)
        status, _, err = nightly(results, "--base-ref", "HEAD~1", "--time-limit", "1s")
    assert status == 75 and "stopped (time limit) with 1 cases undecided" in err
    assert verdicts(results)[WORK]["verdict"] == "undecided"
    status, _, err = perfgate("nightly", "--results", str(results), "--resume", "--blocks", "3",
                              "--base-ref", "HEAD~1", "--", CLOCK)  # fmt: skip
    assert status == 0, err
    assert verdicts(results)[WORK]["verdict"] == "unchanged"


def test_several_gpus_run_the_stored_comparison_one_xdist_worker_each():
    from perfgate.ab.children import environment
    from perfgate.ab.night import NightlyOptions, stored_comparison_command

    two = NightlyOptions(gpus=["GPU-a", "GPU-b"], tests=["perf_tests"])
    command = stored_comparison_command(two)
    assert command[0] == "perf_tests" and command[command.index("-n") + 1] == "2"
    assert "-n" not in stored_comparison_command(NightlyOptions())  # one GPU: no workers
    given = NightlyOptions(gpus=["GPU-a", "GPU-b"], pytest_args=["-n", "1"])
    assert stored_comparison_command(given).count("-n") == 1  # the user's own -n is kept
    assert environment(gpu="GPU-a,GPU-b")["CUDA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"


def test_a_night_on_the_baselines_own_code_is_an_honest_a_a(repo, tmp_path):
    # no commit since the baseline: the stored comparison's flag cannot be the code's
    base = git(repo, "rev-parse", "HEAD").strip()
    baseline = tmp_path / "0001_base.json"
    write_baseline(baseline, base)
    results = tmp_path / "results"
    write_gate(results, row(verdict="unconfirmed", change=5.0))
    status, out, err = nightly(results, "--baseline", str(baseline))
    assert status == 0, out + err
    assert verdicts(results)[WORK]["verdict"] == "unchanged"
