"""The harness's own cost, timed and gated like any case: ``judge`` on synthetic runs (benchmarks
x rounds a side), and loading a store of saved runs and choosing the baseline set from it.

Each case also stores the peak memory that one untimed call allocates (``peak_bytes``, traced
with ``tracemalloc``, which sees numpy's and scipy's arrays), so the gate's memory rule catches a
verdict that grows with the rounds again (issue 20: 9.96 GB for one 190,000-round benchmark).
The synthetic runs share a few sample tuples between their benchmarks, so that 1,000 benchmarks
x 200,000 rounds cost what the verdict allocates, not what the inputs hold.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from perfgate import store
from perfgate.benchmark import Benchmark, Run
from perfgate.measure.timing import measured_median, time_rounds
from perfgate.store import baseline, reading
from perfgate.verdict import judge

pytestmark = pytest.mark.perfgate(family="harness")

SMALL = (10, 100)  # benchmarks, rounds a side
TIERED_PARAMETERS = {
    "size": {
        ("cpu", "quick"): [SMALL],
        ("cpu", "default"): [SMALL, (10, 200_000)],
        ("cpu", "full"): [SMALL, (10, 200_000), (1_000, 100), (1_000, 200_000)],
    },
    "saved_runs": {
        ("cpu", "quick"): [20],
        ("cpu", "default"): [500],
        ("cpu", "full"): [500],
    },
}
# Timed rounds per case, fewer where one call is long (10 x 200,000: 5 s on 2 cores; 1,000 x
# 200,000: 6 minutes). With 3 rounds the gate decides without a significance test.
JUDGE_ROUNDS = {SMALL: 10, (10, 200_000): 3, (1_000, 100): 3, (1_000, 200_000): 1}
STORE_ROUNDS = 3
DISTINCT_SAMPLES = 4  # sample tuples per run, shared round-robin by its benchmarks
NOISE = 0.05  # lognormal sigma of a round
STORE_BENCHMARKS, STORE_ROUNDS_PER_BENCHMARK = 40, 50  # like a saved CPU run of perf_tests


def synthetic_run(benchmarks: int, rounds: int, seed: int) -> Run:
    """A run of ``benchmarks`` benchmarks of ``rounds`` rounds around 1 ms each."""
    rng = np.random.default_rng(seed)
    shared = [tuple(1e-3 * rng.lognormal(0.0, NOISE, rounds)) for _ in range(DISTINCT_SAMPLES)]
    cases = {}
    for index in range(benchmarks):
        name = f"perf_tests/test_synthetic.py::test_case[{index}]"
        cases[name] = Benchmark(name, f"test_case[{index}]", samples=shared[index % len(shared)])
    return Run(None, "2026-11-20T10:00:00+00:00", {}, {}, cases)


def traced_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes that one call of ``fn`` allocates above what was allocated before it."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def record_cost(benchmark, fn: Callable[[], object], per: int, unit: str) -> None:
    """``peak_bytes`` of one untimed call, and the median seconds per ``unit``."""
    if benchmark.disabled:
        return
    benchmark.extra_info["peak_bytes"] = traced_peak_bytes(fn)
    if (seconds := measured_median(benchmark)) is not None:
        benchmark.extra_info[f"seconds_per_{unit}"] = seconds / per


def test_judge(benchmark, bench_device, size):
    benchmarks, rounds = size
    baseline, current = synthetic_run(benchmarks, rounds, 1), synthetic_run(benchmarks, rounds, 2)
    results = []

    def judge_once() -> None:
        results[:] = judge([baseline], current)

    benchmark.group = "harness: judge"
    time_rounds(benchmark, judge_once, bench_device, JUDGE_ROUNDS[size], calls=1)
    assert len(results) == benchmarks  # every benchmark has its verdict
    benchmark.extra_info.update(benchmarks=benchmarks, rounds=rounds)
    record_cost(benchmark, judge_once, benchmarks, "benchmark")


@pytest.fixture(scope="module")
def store_of(tmp_path_factory) -> Callable[[int], Path]:
    """``store_of(n)``: a hardware folder of ``n`` saved runs, one baseline name in sets of 5."""
    made: dict[int, Path] = {}

    def store_of(runs: int) -> Path:
        if runs not in made:
            made[runs] = write_store(tmp_path_factory.mktemp(f"store-{runs}") / "KEY", runs)
        return made[runs]

    return store_of


def write_store(folder: Path, runs: int) -> Path:
    rng = np.random.default_rng(0)
    machine = folder / "Linux-CPython-3.11-64bit"
    machine.mkdir(parents=True)
    for number in range(1, runs + 1):
        entries = [
            {"name": f"test_case[{i}]", "fullname": f"perf_tests/test_x.py::test_case[{i}]",
             "params": {"i": i}, "extra_info": {}, "group": None,
             "stats": {"median": 1e-3, "data": list(1e-3 * rng.lognormal(0.0, NOISE,
                                                                         STORE_ROUNDS_PER_BENCHMARK))}}
            for i in range(STORE_BENCHMARKS)
        ]  # fmt: skip
        hour, minute = divmod(number, 60)  # one run a minute, oldest first
        run = {"benchmarks": entries, "machine_info": {"perfgate": {"hardware_key": "KEY"}},
               "commit_info": {"id": f"{number:040x}"}, "version": "5.2.3",
               "datetime": f"2026-11-20T{hour:02d}:{minute:02d}:00+00:00"}  # fmt: skip
        (machine / f"{number:04d}_cpu-default.json").write_text(json.dumps(run))
    return folder


def test_choose_baseline(benchmark, bench_device, saved_runs, store_of):
    folder = store_of(saved_runs)
    chosen = []

    def load_and_choose() -> None:
        reading._load.cache_clear()  # every round reads the files, as a new pytest session does
        chosen[:] = baseline.choose(None, folder)[1]  # the newest run's set, as a session does

    benchmark.group = "harness: load the store and choose the baseline"
    time_rounds(benchmark, load_and_choose, bench_device, STORE_ROUNDS, calls=1)
    assert len(chosen) == min(saved_runs, baseline.MAX_SET_RUNS)
    assert store.number_of(chosen[-1].path) == saved_runs
    benchmark.extra_info.update(saved_runs=saved_runs)
    record_cost(benchmark, load_and_choose, saved_runs, "saved_run")
