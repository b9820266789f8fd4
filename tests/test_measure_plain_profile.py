"""Profiles of plain ``benchmark(fn)`` cases (perfgate.measure.plain_profile): stored with a saved
run, and the gate naming the Python functions or PyTorch operators a confirmed regression added."""

from __future__ import annotations

import json

import pytest
from helpers import run, saved_runs, virtual_clock_project

PLAIN_CASES = """
import os

import torch

from virtual_clock import work

x = torch.randn(64, 64)


def python_call():
    work()
    if os.environ.get("EXTRA_WORK"):
        sorted(range(20_000), key=lambda n: -n)


def torch_call():
    work()
    y = x @ x
    if os.environ.get("EXTRA_WORK"):
        torch.sort(y, dim=-1)


def test_python(benchmark):
    benchmark(python_call)


def test_torch(benchmark):
    assert benchmark.pedantic(torch_call, rounds=20) is None  # the call's result, as timed
"""

# pytest-benchmark's own calibration of benchmark(fn) needs a clock that moves between two
# readings (its precision): the virtual clock, plus a nanosecond per reading
TICKING_CLOCK = """
import virtual_clock

readings = 0


def clock():
    global readings
    readings += 1
    return virtual_clock.now + readings * 1e-9
"""

TIMED_IN_ROUNDS = """
import torch

from perfgate.measure.timing import time_rounds
from virtual_clock import work


def test_rounds(benchmark):
    time_rounds(benchmark, work, torch.device("cpu"), rounds=5, calls=1)
"""


@pytest.fixture
def plain_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return virtual_clock_project(
        pytester, monkeypatch, test_plain=PLAIN_CASES, ticking_clock=TICKING_CLOCK
    )


def run_plain(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(project, "--benchmark-timer=ticking_clock.clock", *args)


def test_a_saved_run_stores_a_profile_of_each_plain_case(plain_project):
    saving = run_plain(plain_project, "--benchmark-save=base")
    saving.assert_outcomes(passed=2)  # the profiling re-runs are not counted as tests
    saving.stdout.fnmatch_lines(["perfgate: 2 profiles stored in * s"])
    (saved,) = saved_runs(plain_project)
    python, torch_case = json.loads(saved.read_text())["benchmarks"]  # each once
    python_profile = python["extra_info"]["profile"]
    assert python_profile["clock"] == "python"  # no PyTorch operator ran: cProfile's functions
    assert "virtual_clock.py:work" in dict(python_profile["time_us"])
    torch_profile = torch_case["extra_info"]["profile"]
    assert torch_profile["clock"] == "cpu"  # operators ran: torch.profiler's
    assert "aten::mm" in dict(torch_profile["time_us"])


@pytest.mark.slow
def test_the_gate_names_what_a_plain_case_added(plain_project, monkeypatch):
    assert run_plain(plain_project, "--benchmark-save=base").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")
    monkeypatch.setenv("EXTRA_WORK", "1")
    result = run_plain(plain_project, "--perf-gate")
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*top * functions by change in python time per call:*",
            "*+* us <built-in method builtins.sorted> (baseline not in top*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(["*top * kernels by change in cpu time per call:*"])
    report = (plain_project.path / "perfgate-results" / "gate.md").read_text()
    assert "builtins.sorted" in report and "aten::sort" in report


def test_perf_profile_writes_a_plain_cases_table_instead_of_timing_it(plain_project, tmp_path):
    folder = tmp_path / "profiles"
    result = run_plain(plain_project, f"--perf-profile={folder}", "-k", "python")
    assert result.ret == 0, result.stdout.str()
    table = (folder / "test_python.txt").read_text()
    assert "5 calls" in table and "work" in table  # cProfile's table, by self time
    assert (folder / "test_python.prof").exists()  # pstats' file, for snakeviz or pstats


def test_a_case_timed_in_rounds_is_not_profiled(pytester, monkeypatch):
    project = virtual_clock_project(pytester, monkeypatch, test_rounds=TIMED_IN_ROUNDS)
    saving = run(project, "--benchmark-save=base")
    saving.assert_outcomes(passed=1)
    assert "profiles stored" not in saving.stdout.str()  # never run again to be profiled
    (saved,) = saved_runs(project)
    (case,) = json.loads(saved.read_text())["benchmarks"]
    assert "profile" not in case["extra_info"]
