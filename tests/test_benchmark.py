"""The Benchmark model's bound on per-round data: a run keeps at most KEPT_ROUNDS rounds per
benchmark, evenly in order, and every statistic pytest-benchmark computed from all rounds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfgate import store
from perfgate.benchmark import Benchmark, Field, environment_changes, run_from_json
from perfgate.fields import (
    KEPT_ROUNDS,
    ROUNDS_KEPT,
    Clock,
    Fact,
    kept,
    with_bounded_data,
    with_rounds_kept,
)
from perfgate.stats import BOOTSTRAP_POINTS, compare_samples
from perfgate.verdict import Verdict
from perfgate.verdict.judge import judge

MEASURED = 200_000  # rounds of a pure-Python micro-benchmark under pytest-benchmark's calibration


def entry(data: list[float], name: str = "case") -> dict:
    stats = {"min": min(data), "max": max(data), "median": float(np.median(data))}
    stats |= {"rounds": len(data), "data": data}
    return {"name": name, "fullname": f"t.py::{name}", "stats": stats}


def rounds(seconds: float, count: int = MEASURED, seed: int = 0) -> list[float]:
    noise = np.random.default_rng(seed).uniform(0.95, 1.05, count)
    return (seconds * noise).tolist()


def test_kept_rounds_are_evenly_spaced_in_order_first_and_last_included():
    data = list(range(1, MEASURED + 1))
    chosen = kept(data)
    assert len(chosen) == KEPT_ROUNDS and chosen[0] == 1 and chosen[-1] == MEASURED
    gaps = np.diff(chosen)
    assert gaps.min() >= MEASURED // KEPT_ROUNDS and gaps.max() <= MEASURED // KEPT_ROUNDS + 1
    few = [1.0, 2.0, 3.0]
    assert kept(few) is few and with_rounds_kept(entry(few)) == entry(few)


def test_a_bounded_entry_keeps_every_exact_statistic_and_says_how_many_rounds_it_kept():
    full = entry(rounds(1e-6))
    bounded = with_rounds_kept(full)
    assert len(bounded["stats"]["data"]) == KEPT_ROUNDS
    assert bounded["stats"][ROUNDS_KEPT] == KEPT_ROUNDS
    assert {k: v for k, v in bounded["stats"].items() if k not in ("data", ROUNDS_KEPT)} == {
        k: v for k, v in full["stats"].items() if k != "data"
    }
    assert len(full["stats"]["data"]) == MEASURED  # the session's own list is not changed
    benchmark = run_from_json(with_bounded_data({"benchmarks": [full]}), None).benchmarks[
        "t.py::case"
    ]
    assert benchmark.rounds == MEASURED and len(benchmark.samples) == KEPT_ROUNDS


def test_an_old_run_with_every_round_is_bounded_when_loaded(tmp_path):
    path = tmp_path / "0001_old.json"
    path.write_text(json.dumps({"benchmarks": [entry(rounds(1e-6))]}))
    (benchmark,) = store.load(path).benchmarks.values()
    assert len(benchmark.samples) == KEPT_ROUNDS and benchmark.rounds == MEASURED
    [shown] = store.comparison_entries(path)  # what pytest-benchmark's table compares with
    assert len(shown["stats"]["data"]) == KEPT_ROUNDS and shown["stats"]["rounds"] == MEASURED


@pytest.mark.parametrize(
    ("slower", "verdict"),
    [(1.0, Verdict.UNCHANGED), (1.5, Verdict.UNCONFIRMED), (0.6, Verdict.IMPROVEMENT)],
)
def test_the_verdict_on_kept_rounds_agrees_with_every_round(slower, verdict):
    base_rounds, now_rounds = rounds(1e-6, seed=1), rounds(1e-6 * slower, seed=2)
    base = run_from_json(with_bounded_data({"benchmarks": [entry(base_rounds)]}), None)
    now = run_from_json(with_bounded_data({"benchmarks": [entry(now_rounds)]}), None)
    (result,) = judge([base], now)
    assert result.verdict is verdict, result.message
    everything = compare_samples(base_rounds, now_rounds)
    assert result.comparison.ratio == pytest.approx(everything.ratio, rel=0.005)
    significant = everything.p_value < 0.01 or everything.p_value_faster < 0.01
    assert significant == (verdict is not Verdict.UNCHANGED)


def test_a_run_saved_outside_git_has_no_commit():
    unversioned = {"benchmarks": [], "commit_info": {"id": "unversioned", "dirty": False}}
    assert run_from_json(unversioned, None).commit is None
    versioned = {"benchmarks": [], "commit_info": {"id": "0123abc"}}
    assert run_from_json(versioned, None).commit == "0123abc"


def test_a_run_saved_by_pytest_benchmark_alone_shows_no_environment_change():
    assert environment_changes({}, {"python": "3.11.7"}) == []
    assert environment_changes({"python": "3.11.7"}, {"python": "3.12.1"}) == [
        ("python", "3.11.7", "3.12.1")
    ]


def test_kept_rounds_are_the_rounds_the_bootstrap_resamples():
    assert KEPT_ROUNDS == BOOTSTRAP_POINTS  # a kept run loses nothing the verdict would use


def benchmark_with(**extra) -> Benchmark:
    return Benchmark("t.py::test_a[x]", "test_a[x]", samples=(1e-3, 2e-3), extra_info=extra)


def test_the_accessors_read_the_fields_the_measure_stage_writes():
    profile = {"rows": [["kernel", 1.0]]}
    case = benchmark_with(**{
        Field.CLOCK: Clock.DEVICE, Field.DEVICE_S: 1.5e-3, Field.HOST_BOUND: True,
        Field.CODE_PATH: "fused", Field.PROFILE: profile, Field.PEAK_BYTES: 4096,
        Field.LAUNCH_COUNTS: {"kernel_launches": 2}, Field.REDUCED_CLOCK_ROUNDS: 3,
        Field.GPU: {"index": 1}, Field.DECLARATIONS: {"family": "sdpa"}, Fact.BATCH: 32,
    })  # fmt: skip
    assert case.device_timed and case.device_seconds == 1.5e-3 and case.host_bound
    assert (case.code_path, case.profile, case.peak_bytes) == ("fused", profile, 4096)
    assert case.launch_counts == {"kernel_launches": 2} and case.reduced_clock_rounds == 3
    assert (case.gpu, case.family, case.fact(Fact.BATCH)) == ({"index": 1}, "sdpa", 32)
    assert not case.counted and case.instructions is None and case.counters is None


def test_the_accessors_of_a_counted_case_and_of_absent_or_mistyped_fields():
    counted = benchmark_with(**{Field.MEASURE: "instructions", Field.INSTRUCTIONS: 1200,
                                Field.COUNTERS: {"python_calls": 3}})  # fmt: skip
    assert counted.counted and counted.instructions == 1200
    assert counted.counters == {"python_calls": 3}
    bare = benchmark_with(**{Field.HOST_BOUND: 0, Field.PROFILE: "table.txt",
                             Field.FORWARD_PEAK_BYTES: 512, Field.DEVICE_S: True})  # fmt: skip
    assert not bare.host_bound and bare.profile is None  # a profile file's name, not a record
    assert bare.peak_bytes == 512 and bare.device_seconds is None  # a bool is not a number
    assert (bare.clock, bare.reduced_clock_rounds, bare.gpu, bare.fact(Fact.MODE, "?")) == (
        None, 0, None, "?")  # fmt: skip
