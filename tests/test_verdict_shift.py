"""A machine-wide shift (perfgate.verdict.shift): when most of a session's cases ran slower
together, each case is judged against that shift too, so a busy machine fails nothing while a
real slowdown of one case among many still fails, naming it alone. Synthetic runs first, then a
whole gated session on a virtual clock whose machine runs slower."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import entry, run, run_of, virtual_clock_project

from perfgate.verdict import Verdict, judge, summary
from perfgate.verdict.rows import from_json
from perfgate.verdict.shift import MIN_CASES, detect

CASES = 16


def session(slowdowns: list[float], seed: int, cv: float = 0.03) -> object:
    """A run of one case per slowdown: 40 rounds of ~1 ms times it, lognormal noise ``cv``."""
    rng = np.random.default_rng(seed)
    entries = [
        entry(f"t.py::test_{i}", list(1e-3 * (1 + i / 10) * factor * rng.lognormal(0, cv, 40)))
        for i, factor in enumerate(slowdowns)
    ]
    return run_of(*entries)


def loaded(cases: int = CASES, seed: int = 0) -> list[float]:
    """How a busy machine slows each case: 1.3 to 1.9 times, each case its own amount."""
    return list(np.random.default_rng(seed).uniform(1.3, 1.9, cases))


def gate(baseline, slowdowns: list[float], seed: int):
    """The gate's two passes: judge, re-run (the same loaded machine) what looked slower."""
    current = session(slowdowns, seed)
    confirmation = session(slowdowns, seed + 1000)
    return judge([baseline], current, confirmation=confirmation)


def slower(results) -> set[str]:
    return {r.name for r in results if r.verdict.slower}


def test_a_busy_machine_alone_fails_no_case_and_says_why():
    baseline = session([1.0] * CASES, 1)
    results = gate(baseline, loaded(), 2)
    without = judge([baseline], session(loaded(), 2), confirmation=session(loaded(), 1002))
    assert slower(results) == set(), [r.message for r in results if r.verdict.slower]
    assert all(r.verdict is Verdict.UNCHANGED for r in results)
    line = summary.terminal_lines(results, [], "base")[1]
    assert line.startswith("  machine: the machine ran slower in this session: 16 of 16")
    assert all("unchanged against the machine's shift" in r.message for r in results)
    assert without  # judged: the same runs compared case by case would fail (next test)


def test_without_the_shift_rule_the_same_busy_session_fails_most_cases(monkeypatch):
    from perfgate.verdict import shift

    monkeypatch.setattr(shift, "detect", lambda results: None)
    results = gate(session([1.0] * CASES, 1), loaded(), 2)
    assert len(slower(results)) >= CASES - 2  # what shipped: 15-16 of 16 "confirmed"


@pytest.mark.parametrize("factor", [4.0, 3.0])
def test_one_case_slowed_among_many_on_a_busy_machine_fails_alone(factor):
    slowdowns = loaded()
    slowdowns[5] *= factor
    results = {r.name: r for r in gate(session([1.0] * CASES, 1), slowdowns, 2)}
    assert slower(results.values()) == {"t.py::test_5"}
    case = results["t.py::test_5"]
    assert case.verdict is Verdict.REGRESSION
    assert any("beyond the machine's shift" in line for line in case.details)


def test_on_a_quiet_machine_nothing_shifts_and_a_small_slowdown_still_fails():
    slowdowns = [1.0] * CASES
    slowdowns[3] = 1.25
    results = gate(session([1.0] * CASES, 1), slowdowns, 2)
    assert detect(judge([session([1.0] * CASES, 1)], session(slowdowns, 2))) is None
    assert slower(results) == {"t.py::test_3"}
    assert summary.machine_shift(results) is None


def test_too_few_cases_to_tell_the_machine_from_the_code():
    few = MIN_CASES - 1
    results = gate(session([1.0] * few, 1), loaded(few), 2)
    assert summary.machine_shift(results) is None
    assert len(slower(results)) == few  # judged case by case, as before


def test_a_faster_machine_is_no_shift_and_a_slowdown_stands_out():
    slowdowns = [0.7] * CASES
    slowdowns[0] = 1.3
    results = gate(session([1.0] * CASES, 1), slowdowns, 2)
    assert summary.machine_shift(results) is None
    assert slower(results) == {"t.py::test_0"}


SHIFTED = """
from virtual_clock import work
import os, pytest

CASES = [f"c{i}" for i in range(10)]
SLOW = {f"c{i}": 1.3 + 0.05 * i for i in range(10)}  # how a busy machine slows each case

@pytest.mark.parametrize("case", CASES)
def test_case(benchmark, case):
    factor = SLOW[case] if os.environ.get("BUSY") else 1.0
    if os.environ.get("SLOW_CASE") == case:
        factor *= 4
    benchmark.pedantic(lambda: [work() for _ in range(round(factor * 10))], rounds=20,
                       iterations=1, warmup_rounds=1)
"""


@pytest.fixture
def shifted(pytester, monkeypatch):
    project = virtual_clock_project(pytester, monkeypatch, test_shifted=SHIFTED)
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.0002")
    assert run(project, "--benchmark-save=quiet").ret == 0
    return project


def test_a_gated_session_on_a_slower_machine_passes_with_one_line(shifted, monkeypatch):
    monkeypatch.setenv("BUSY", "1")
    result = run(shifted, "--perf-gate")
    output = result.stdout.str()
    assert result.ret == 0, output
    assert "machine: the machine ran slower in this session: 10 of 10" in output


def test_a_4x_slowdown_on_a_slower_machine_fails_naming_that_case_alone(shifted, monkeypatch):
    monkeypatch.setenv("BUSY", "1")
    monkeypatch.setenv("SLOW_CASE", "c4")
    result = run(shifted, "--perf-gate")
    output = result.stdout.str()
    assert result.ret == 1, output
    rows = from_json(json.loads((shifted.path / "perfgate-results" / "gate.json").read_text()))
    assert {r.name.split("::")[-1] for r in rows if r.verdict.slower} == {"test_case[c4]"}
