"""``perfgate ab``: a throwaway git repository with a tiny perf_tests/ whose cost per call is a
file read by a virtual clock, so durations are exact on any machine; the paired statistics."""

from __future__ import annotations

import gzip
import json
import shlex
from pathlib import Path

import pytest
from helpers import (
    AB_CLOCK,
    COST_CLOCK,
    commit,
    error_line,
    git,
    perfgate,
    refused_at_the_door,
    worktrees,
)

from perfgate.ab import blocks, trees
from perfgate.verdict.paired import compare_paired_blocks
from perfgate.verdict.rows import AB, GateRow, rows_of


def last_error(err: str) -> str:
    """The one error line of ``err``, its last, after the A/B's progress lines."""
    errors = [line for line in err.splitlines() if line.startswith("perfgate ab: error: ")]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


def results(path: Path) -> dict[str, GateRow]:
    """The rows of an ab.json, read as perfgate reads them (its format checked)."""
    _, found = rows_of(AB, json.loads(path.read_text()))
    return {row.name: row for row in found}


def ratio_of(row: GateRow) -> float:
    """B's time over A's."""
    return 1 + row.change_percent / 100


def test_a_commit_that_doubles_the_cost_is_a_regression(repo, tmp_path):
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    out_file = tmp_path / "ab.json"
    status, out, err = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--out", str(out_file), "--", AB_CLOCK
    )
    assert status == 1, out
    (row,) = results(out_file).values()
    assert row.verdict == "regression" and 1.9 < ratio_of(row) < 2.1 and row.pairs == 3
    # issue 31: each block says where the A/B is: elapsed, what remains, cases decided
    progress = [line for line in err.splitlines() if line.startswith("A/B blocks ")]
    assert len(progress) == 6 and progress[-1].startswith("A/B blocks 6/6: pair 3 B: 1 cases")
    assert "1 of 1 cases decided" in progress[-1] and "elapsed, about" in progress[0]
    assert "\n  lane 1: 1 cases, 3 of their block pairs to run\n" in err  # the plan, no costs
    assert "test_work: regression: slower by" in out and "1 gated (1 regression)" in out
    assert worktrees(repo) == 1  # the base worktree is gone


def test_another_projects_test_paths_against_uncommitted_changes(repo, tmp_path):
    git(repo, "mv", "perf_tests", "bench")  # no perf_tests/: another project's layout
    commit(repo, "benchmarks in bench/")
    (repo / "cost.txt").write_text("0.002")  # not committed: B is the tree as it is on disk
    out_file = tmp_path / "ab.json"
    status, out, err = perfgate("ab", "HEAD", "--tests", "bench", "--blocks", "3",
                                "--out", str(out_file), "--", AB_CLOCK)  # fmt: skip
    assert status == 1, out + err
    (row,) = results(out_file).values()
    assert row.name.startswith("bench/test_work.py::") and row.verdict == "regression"


def test_a_base_that_is_the_tree_under_test_is_refused_before_any_block(repo, tmp_path):
    # issue 33: an A/A (--base-ref HEAD of a clean tree) overrode a confirmed regression
    status, _, err = perfgate("ab", "HEAD", "--out", str(tmp_path / "ab.json"), "--", AB_CLOCK)
    assert status == 2 and "is the tree under test, file for file" in error_line(err, "ab")
    assert worktrees(repo) == 1 and not (tmp_path / "ab-blocks").exists()


def test_without_tests_the_blocks_run_the_projects_own_test_paths(repo, tmp_path):
    """No --tests: pytest's testpaths of the project, never a folder perfgate knows by name."""
    git(repo, "mv", "perf_tests", "bench")
    (repo / "perf_tests").mkdir()  # a folder of that name, not the project's benchmarks
    (repo / "perf_tests" / "test_not_here.py").write_text("def test_x():\n    assert False\n")
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = bench\n")
    commit(repo, "benchmarks in bench/, as the project's testpaths say")
    (repo / "README").write_text("no change to the cost")
    commit(repo, "docs only")
    out_file = tmp_path / "ab.json"
    status, out, err = perfgate("ab", "HEAD~1", "--blocks", "3", "--rounds-per-block", "8",
                                "--out", str(out_file), "--", AB_CLOCK)  # fmt: skip
    assert status == 0, out + err
    assert [name.split("::")[0] for name in results(out_file)] == ["bench/test_work.py"]


def test_three_blocks_five_times_slower_is_a_regression(repo, tmp_path):
    # 5x slower was once called unchanged; block pairs are decided by their t-test (3 pairs)
    (repo / "cost.txt").write_text("0.005")
    commit(repo, "five times the cost")
    out_file = tmp_path / "ab.json"
    status, out, _ = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--out", str(out_file), "--", AB_CLOCK
    )
    assert status == 1, out
    (row,) = results(out_file).values()
    assert row.verdict == "regression" and 4.5 < ratio_of(row) < 5.5 and row.pairs == 3
    assert "without a significance test" not in row.message
    assert "Infinity" not in out_file.read_text()  # strict JSON
    assert "not gated: not gated" not in out


def test_an_unchanged_commit_is_not_slower(repo, tmp_path):
    (repo / "README").write_text("no change to the cost")
    commit(repo, "docs only")
    out_file = tmp_path / "ab.json"
    status, out, _ = perfgate(
        "ab",
        "HEAD~1",
        "-k",
        "work",
        "--blocks",
        "3",
        "--rounds-per-block",
        "8",
        "--out",
        str(out_file),
        "--",
        AB_CLOCK,
    )
    assert status == 0, out
    (row,) = results(out_file).values()
    assert row.verdict == "unchanged" and 0.95 < ratio_of(row) < 1.05
    assert worktrees(repo) == 1


def test_a_failing_block_is_one_line_and_the_worktree_is_removed(repo, tmp_path):
    (repo / "cost.txt").write_text("not a number")
    commit(repo, "broken")
    status, _, err = perfgate("ab", "HEAD~1", "--blocks", "3", "--out", str(tmp_path / "x.json"),
                              "--", AB_CLOCK)  # fmt: skip
    assert status == 2
    line = last_error(err)
    assert "a block of tree B: pytest exited 1; its output is in" in line
    assert worktrees(repo) == 1
    assert (tmp_path / "x-blocks" / "lane0-pair0-B.log").is_file()


def test_an_interrupt_removes_the_worktree_and_keeps_what_it_decided(repo, tmp_path, monkeypatch):
    seen = []

    def interrupted(process, names, pytest_args, report, log):
        seen.append(process.tree)
        raise KeyboardInterrupt

    monkeypatch.setattr(blocks, "run_block", interrupted)
    (repo / "README").write_text("a change")
    commit(repo, "docs")
    out_file = tmp_path / "ab.json"
    status, _, err = perfgate("ab", "HEAD~1", "--out", str(out_file))
    assert status == 130 and "stopped (interrupted)" in err and "--resume" in err
    assert seen and not seen[0].exists() and worktrees(repo) == 1
    (row,) = results(out_file).values()
    assert row.verdict == "undecided" and "stopped (interrupted)" in row.message
    assert json.loads(out_file.read_text())["remaining"] == [row.name]


@pytest.mark.parametrize(
    "argv, line",
    [
        (["ab", "no-such-ref"], "BASE_REF 'no-such-ref' names no commit"),
        (["ab", "HEAD~1", "--gpus", "0"], "--gpus 0: give 1 or more"),
        (["ab", "HEAD~1", "--time-limit=-5m"], "--time-limit '-5m': a duration"),
        (["ab", "HEAD~1", "--resume"], "--resume: no A/B to continue in"),
    ],
)
def test_usage_errors_are_one_line(repo, argv, line):
    (repo / "README").write_text("a change")
    commit(repo, "docs")
    status, _, err = perfgate(*argv)
    assert status == 2 and line in error_line(err, "ab"), err


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--blocks", "2"], "argument --blocks: '2': give a whole number, 3 or more"),
        (["--rounds-per-block", "0"], "--rounds-per-block: '0': give a whole number, 1 or more"),
        (["--threshold", "15"], "threshold '15' is ambiguous: write 15% or 0.15"),
        (["--threshold", "sdpa=25"], "threshold '25' is ambiguous: write 25% or 0.25"),
    ],
)
def test_values_that_cannot_work_are_refused_before_anything_runs(repo, capsys, argv, line):
    assert line in refused_at_the_door(capsys, "ab", "HEAD", *argv)
    assert worktrees(repo) == 1


def test_a_selection_that_matches_nothing_says_so(repo):
    (repo / "README").write_text("a change")
    commit(repo, "docs")
    status, _, err = perfgate("ab", "HEAD~1", "-k", "nothing_like_this", "--blocks", "3")
    assert status == 2 and "no case ran in both trees" in last_error(err)
    assert worktrees(repo) == 1


def test_outside_a_git_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = perfgate("ab", "HEAD")
    assert status == 2 and "is not inside a git repository" in err


def test_paired_blocks_cancel_drift_that_a_pair_shares():
    drift = [1.0, 1.3, 0.8, 1.1, 1.2]  # each pair of blocks ran at a different speed
    base = [1e-3 * d for d in drift]
    slower = [1.03e-3 * d * (1 + 0.001 * i) for i, d in enumerate(drift)]
    c = compare_paired_blocks(base, slower)
    assert 1.03 < c.ratio < 1.035 and c.p_value < 1e-4 and c.ratio_low > 1.02
    same = compare_paired_blocks(base, [b * (1 + 0.001 * (-1) ** i) for i, b in enumerate(base)])
    assert same.p_value > 0.1 and same.ratio_low < 1 < same.ratio_high


def test_paired_blocks_need_three_pairs_for_a_test_and_equal_counts():
    two = compare_paired_blocks([1.0, 1.0], [2.0, 2.2])
    assert not two.enough_rounds and two.p_value == 1.0 and two.smallest_p == 1.0
    assert (two.round_ratio_low, two.round_ratio_high) == pytest.approx((2.0, 2.2))
    with pytest.raises(ValueError, match="2 baseline blocks but 3 current blocks"):
        compare_paired_blocks([1.0, 1.0], [1.0, 1.0, 1.0])


def test_the_gate_names_the_ab_command_for_exactly_its_regressions():
    from perfgate.session.gate import ab_hint

    regressed = {"perf_tests/test_mxint8.py::test_dequantize[cuda-1-triton-32]",
                 "perf_tests/test_sdpa.py::test_attention[cuda-x-flash-fp16]"}  # fmt: skip
    hint = ab_hint(regressed, "0123456789abcdef")
    # the node ids, not -k of their functions (which ran every parametrization of them)
    assert hint.endswith(
        "perfgate ab 0123456789ab --tests "
        "'perf_tests/test_mxint8.py::test_dequantize[cuda-1-triton-32]' "
        "'perf_tests/test_sdpa.py::test_attention[cuda-x-flash-fp16]'"
    )
    moved = ab_hint(regressed, "0123456789abcdef", lambda name: "../" + name)
    assert "--tests '../perf_tests/test_mxint8.py::test_dequantize[cuda-1-triton-32]'" in moved
    assert ab_hint(set(), "0123456789abcdef") is None and ab_hint(regressed, None) is None


def test_the_gates_ab_command_pasted_into_a_shell_gives_back_the_exact_node_id():
    from perfgate.session.gate import ab_hint

    case = "tests/test_a.py::test_x[a b-1]"  # a shell would glob [...] and split at the space
    hint = ab_hint({case}, "0123456789abcdef")
    command = shlex.split(hint.split("alternating blocks: ")[1])
    assert command == ["perfgate", "ab", "0123456789ab", "--tests", case]


def test_a_node_id_is_said_from_the_folder_the_session_ran_in(tmp_path):
    from types import SimpleNamespace

    from perfgate.session.baseline import node_id_from_here

    config = SimpleNamespace(rootpath=tmp_path, invocation_params=SimpleNamespace(dir=tmp_path))
    assert node_id_from_here(config, "tests/t.py::test_x[1]") == "tests/t.py::test_x[1]"
    config.invocation_params.dir = tmp_path / "tests"
    assert node_id_from_here(config, "tests/t.py::test_x[1]") == "t.py::test_x[1]"
    config.invocation_params.dir = tmp_path / "elsewhere"
    assert node_id_from_here(config, "tests/t.py::test_x[1]") == "../tests/t.py::test_x[1]"


GPU_BENCHMARKS = """
import os
from virtual_clock import work

def record(benchmark):
    benchmark.extra_info["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    benchmark.pedantic(work, rounds=5, iterations=1, warmup_rounds=0)
""" + "".join(f"\ndef test_{name}(benchmark):\n    record(benchmark)\n" for name in "abcd")


def test_each_gpu_gets_a_block_process_per_tree_and_a_case_keeps_its_gpu(repo, tmp_path):
    (repo / "perf_tests" / "test_work.py").write_text(GPU_BENCHMARKS)
    commit(repo, "four cases")
    (repo / "README").write_text("docs only")
    commit(repo, "docs")
    out_file = tmp_path / "ab.json"
    status, out, err = perfgate("ab", "HEAD~1", "--blocks", "3", "--gpus", "GPU-aa,GPU-bb",
                                "--out", str(out_file), "--", AB_CLOCK)  # fmt: skip
    assert status == 0, out + err
    assert json.loads(out_file.read_text())["lanes"] == 2 and len(results(out_file)) == 4
    seen: dict[str, set] = {}
    for report in (tmp_path / "ab-blocks").glob("lane*-pair*-*.json.gz"):  # kept gzipped
        lane, label = int(report.name[4]), report.name.split("-")[2][0]
        for entry in json.loads(gzip.decompress(report.read_bytes()))["benchmarks"]:
            visible = entry["extra_info"]["visible"]
            assert visible == ["GPU-aa", "GPU-bb"][lane]  # the block process's own GPU
            seen.setdefault(entry["fullname"], set()).add((label, visible))
    assert len(seen) == 4 and {v for cases in seen.values() for _, v in cases} == {
        "GPU-aa",
        "GPU-bb",
    }
    for ran in seen.values():  # A and B of a case on one GPU
        assert {tree for tree, _ in ran} == {"A", "B"} and len({gpu for _, gpu in ran}) == 1


def test_an_ab_that_gated_nothing_cannot_pass(repo, tmp_path, monkeypatch):
    # issue 33: perfgate ab exited 0 with every case "not gated" (the gate exits 6 on that), and
    # printed "not gated: not gated:"
    from perfgate.ab import compare
    from perfgate.verdict import Verdict
    from perfgate.verdict.outcome import GateResult
    from perfgate.verdict.reason import Reason

    noisy = GateResult("perf_tests/test_work.py::test_work", Verdict.NOT_GATED,
                       "not gated: too noisy to decide", reason=Reason.TOO_NOISY)  # fmt: skip
    monkeypatch.setattr(compare, "run_ab", lambda options, err: compare.AbRun("c" * 40, [noisy]))
    status, out, err = perfgate("ab", "HEAD~1", "--out", str(tmp_path / "ab.json"))
    assert status == 6 and "no case was decided" in err
    assert "test_work: not gated: too noisy to decide" in out and "not gated: not gated" not in out


# Every pytest session (a block, or a collection) on this machine runs 4 % slower than the one
# before: a counter shared by both trees' processes, named by PERFGATE_TEST_SESSIONS.
DRIFT_CONFTEST = """
import os
from pathlib import Path

def pytest_sessionstart(session):
    counter = Path(os.environ["PERFGATE_TEST_SESSIONS"])
    sessions = int(counter.read_text()) + 1 if counter.exists() else 0
    counter.write_text(str(sessions))
"""
DRIFTING_CLOCK = COST_CLOCK.replace(
    "now += cost",
    "now += 1.04 ** int(Path(os.environ['PERFGATE_TEST_SESSIONS']).read_text()) * cost",
).replace("import random", "import os, random")


@pytest.mark.parametrize("order", ["A B, A B (before)", "A B, B A"])
def test_a_drift_in_time_is_a_regression_in_the_old_order_only(repo, tmp_path, monkeypatch, order):
    (repo / "conftest.py").write_text(DRIFT_CONFTEST)
    (repo / "virtual_clock.py").write_text(DRIFTING_CLOCK)
    commit(repo, "a machine that slows down")
    (repo / "README").write_text("docs only")
    commit(repo, "docs")
    monkeypatch.setenv("PERFGATE_TEST_SESSIONS", str(tmp_path / "sessions"))
    if order.endswith("(before)"):
        from perfgate.ab import engine

        monkeypatch.setattr(engine, "pair_order", lambda pair: ("A", "B"))
        monkeypatch.setattr(engine, "b_first", lambda pair: False)
    out_file = tmp_path / "ab.json"
    status, out, err = perfgate("ab", "HEAD~1", "--blocks", "4", "--threshold", "2%",
                                "--out", str(out_file), "--", AB_CLOCK)  # fmt: skip
    (row,) = results(out_file).values()
    if order.endswith("(before)"):  # B ran after A in every pair: 4 % slower, falsely
        assert status == 1 and row.verdict == "regression" and ratio_of(row) > 1.03, out
    else:  # the drift cancels across the two orders
        assert status in (0, 6) and row.verdict != "regression", out + err
        assert abs(ratio_of(row) - 1) < 0.01


def test_what_running_writes_in_the_tree_is_not_a_change_of_it(repo):
    # Python's bytecode and pytest's cache appear in B's tree as its blocks run (CI does not
    # set PYTHONDONTWRITEBYTECODE): the tree's identity, which --resume checks, stays the same
    before = trees.state(repo, repo / "results")
    for written in ("__pycache__/conftest.cpython-311.pyc", "sub/__pycache__/x.pyc",
                    ".pytest_cache/v/cache/lastfailed"):  # fmt: skip
        (repo / written).parent.mkdir(parents=True, exist_ok=True)
        (repo / written).write_text("x")
    assert trees.state(repo, repo / "results") == before
    (repo / "new_module.py").write_text("x = 1")
    assert trees.state(repo, repo / "results") != before
