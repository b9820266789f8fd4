"""Attribution: the compact profiles stored with timed cases, their diff, and the gate naming the
operators that changed in a confirmed regression (baseline side from the stored profile)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import TIMED_CASE, run, saved_runs, virtual_clock_project

from perfgate.benchmark import run_from_json
from perfgate.measure import profiler as profiling
from perfgate.verdict.attribution import profile_diff
from perfgate.verdict.judge import Verdict, judge


def test_a_compact_profile_lists_operator_time_and_where_memory_was_allocated():
    x = torch.randn(128, 128)
    cpu = torch.device("cpu")
    events = profiling.run_profiler(lambda: torch.softmax(x @ x, dim=-1), cpu, 5).events()
    profile = profiling.compact(events, cpu, 5)
    assert profile["clock"] == "cpu" and profile["calls"] == 5
    times = dict(profile["time_us"])
    assert times["aten::mm"] > 0 and times["aten::_softmax"] > 0
    allocated = dict(profile["allocated_bytes"])
    assert allocated["aten::matmul > aten::mm"] == 128 * 128 * 4  # per call
    assert allocated["aten::softmax > aten::_softmax"] == 128 * 128 * 4


def test_an_allocation_outside_any_operator_is_named_by_itself():
    class Event:
        def __init__(self, name, parent=None):
            self.name, self.cpu_parent = name, parent

    top = Event("aten::linear")
    assert profiling.allocation_site(Event("aten::empty", Event("aten::addmm", top))) == (
        "aten::linear > aten::empty"
    )
    assert profiling.allocation_site(Event("[memory]")) == "[memory]"


def profile(clock="device", **parts) -> dict:
    return {"clock": clock, "calls": 5, **{k: [list(row) for row in v] for k, v in parts.items()}}


BASE = profile(
    time_us=[("gemv_kernel", 20.0), ("dequantize_kernel", 8.0), ("copy", 1.0)],
    allocated_bytes=[("aten::linear > aten::empty", 4096)],
)


def test_the_diff_puts_the_kernels_that_changed_most_first():
    now = profile(time_us=[("gemv_kernel", 20.1), ("dequantize_kernel", 16.0), ("fill", 2.0)])
    lines = profile_diff(BASE, now, "time")
    assert lines[0] == "top 4 kernels by change in device time per call:"
    assert lines[1] == "+8.0 us dequantize_kernel (baseline 8.0 us -> now 16.0 us)"
    assert lines[2] == "+2.0 us fill (baseline not in top -> now 2.0 us)"
    assert lines[3] == "-1.0 us copy (baseline 1.0 us -> now not in top)"


def test_the_memory_diff_names_the_allocation_that_grew():
    grown = [("aten::linear > aten::empty", 4096), ("split_k > aten::empty", 1_900_000)]
    now = profile(allocated_bytes=grown)
    lines = profile_diff(BASE, now, "memory")
    assert lines[1] == "+1,900,000 B split_k > aten::empty (baseline not in top -> now 1,900,000 B)"


@pytest.mark.parametrize(
    ("baseline", "current", "says"),
    [
        (None, BASE, "no profile stored with the baseline"),
        (BASE, None, "no profile of the current run"),
        (BASE, profile(clock="cpu"), "profiles of other clocks"),
        (BASE, BASE, "no change in the stored profiles"),
    ],
)
def test_a_diff_that_cannot_be_made_says_why_in_one_line(baseline, current, says):
    (line,) = profile_diff(baseline, current, "time")
    assert says in line


def test_a_case_never_profiled_says_nothing_about_profiles():
    assert profile_diff(None, None, "time") == []  # not timed by perfgate.measure.timing


def timed_run(seconds: float, extra: dict) -> object:
    samples = [seconds * (1 + 0.001 * i) for i in range(20)]
    entry = {"name": "case", "fullname": "t.py::case", "stats": {"data": samples}}
    return run_from_json({"benchmarks": [{**entry, "extra_info": extra}]}, None)


def test_a_confirmed_regression_carries_the_diff_of_the_stored_profiles():
    slow = profile(time_us=[("gemv_kernel", 20.0), ("dequantize_kernel", 16.0)])
    baseline = timed_run(1e-3, {"profile": BASE, "peak_bytes": 4096})
    current = timed_run(1.3e-3, {"profile": slow, "peak_bytes": 8192})
    (first,) = judge([baseline], current)
    assert first.verdict is Verdict.REGRESSION  # peak memory needs no re-run
    assert first.details[0] == "top 1 allocations by change in bytes per call:"
    assert not any("dequantize_kernel" in line for line in first.details)  # time: unconfirmed
    (again,) = judge([baseline], current, confirmation=current)
    assert any("+8.0 us dequantize_kernel" in line for line in again.details)
    (unconfirmed,) = judge([baseline], timed_run(1.3e-3, {"profile": slow}))
    assert unconfirmed.verdict is Verdict.UNCONFIRMED and unconfirmed.details == ()


# --- end to end: a baseline saved with profiles, then a slower tree gated ----------------------


@pytest.fixture
def timed_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return virtual_clock_project(pytester, monkeypatch, test_timed=TIMED_CASE)


@pytest.mark.slow
def test_the_gate_names_the_operator_a_regression_added(timed_project, monkeypatch):
    saving = run(timed_project, "--benchmark-save=base")
    saving.assert_outcomes(passed=2)  # the profiling re-runs are not counted as tests
    saving.stdout.fnmatch_lines(["perfgate: 2 profiles stored in * s"])
    (saved,) = saved_runs(timed_project)
    plain, case = json.loads(saved.read_text())["benchmarks"]  # each once: re-runs not saved
    assert "aten::mm" in dict(case["extra_info"]["profile"]["time_us"])  # saved with a profile
    assert plain["extra_info"]["profile"]["clock"] == "python"  # ran no PyTorch operator

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")
    monkeypatch.setenv("EXTRA_SORT", "1")
    result = run(timed_project, "--perf-gate")
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=2)  # nor the gate's confirmation and profiling re-runs
    result.stdout.fnmatch_lines(
        [
            "*top * kernels by change in cpu time per call:*",
            "*+* us aten::sort (baseline not in top*",
        ]
    )
    report = (timed_project.path / "perfgate-results" / "gate.md").read_text()
    assert "aten::sort" in report


@pytest.mark.slow
def test_a_run_that_is_not_saved_stores_no_profile(timed_project, tmp_path):
    report = tmp_path / "run.json"
    assert run(timed_project, f"--benchmark-json={report}").ret == 0
    assert "profile" not in json.loads(report.read_text())["benchmarks"][1]["extra_info"]
    assert run(timed_project, f"--benchmark-json={report}", "--perf-store-profiles=always").ret == 0
    assert "profile" in json.loads(report.read_text())["benchmarks"][1]["extra_info"]


def test_a_part_missing_from_a_cut_list_changed_at_most_by_the_distance_to_its_floor():
    from perfgate.verdict.attribution import top_changes

    before = {"big": 1000, "small": 300}  # cut: parts below 300 were not stored
    now = {"big": 1000, "small": 300, "view": 228, "crc32": 700}
    lines = top_changes(before, now, 10, "{:,}".format, cut=(True, False))
    # view may have been 228 before too (below the floor): no change claimed
    assert lines == ["+400 or more crc32 (baseline not in top (at most 300) -> now 700)"]
    complete = top_changes(before, now, 10, "{:,}".format, cut=(False, False))
    assert complete[0] == "+700 crc32 (baseline not in top -> now 700)"
