"""Change points on synthetic series: a 3 % step in 2 % noise is found, pure noise gives (almost)
none, and the steps come with their run, commit, size and p-value."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import FLAT, STEPPED, write_history

from perfgate.cli.history_runs import load
from perfgate.store.schema import aware, recorded_at
from perfgate.verdict import steps as changepoints
from perfgate.verdict.steps import StepsUnavailable

NOISE = 0.02  # run-to-run noise, relative standard deviation


def noisy(runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 1e-3 * (1 + NOISE * rng.standard_normal(runs))


def with_step(per_side: int, seed: int, step: float = 0.03) -> np.ndarray:
    series = noisy(2 * per_side, seed)
    series[per_side:] *= 1 + step
    return series


def found_near(series: np.ndarray, where: int, tolerance: int = 6) -> bool:
    return any(abs(i - where) <= tolerance and after > before for i, before, after, _ in
               changepoints.detect(series))  # fmt: skip


def test_a_3_percent_step_in_2_percent_noise_is_found():
    # Measured: with 30 runs on each side, found within 6 runs of the step in 50 of 50 seeds
    # (with 10 a side, about 1 in 3: a 1.5-sigma step needs many runs to be told from noise).
    hits = sum(found_near(with_step(30, seed), 30) for seed in range(50))
    assert hits >= 45, f"found in only {hits} of 50 series"


def test_a_clear_step_is_found_with_ten_runs_a_side():
    hits = sum(found_near(with_step(10, seed, step=0.10), 10, tolerance=1) for seed in range(20))
    assert hits == 20


@pytest.mark.parametrize("runs", [8, 30, 60])
def test_pure_noise_gives_no_step_but_rarely(runs):
    # Measured rate over 300 seeds: 0/300 (8 runs), 1/300 (30), 3/300 (60): about 1 %, the
    # permutation test's alpha. Here: 100 seeds each.
    false = sum(bool(changepoints.detect(noisy(runs, seed))) for seed in range(100))
    assert false <= 2, f"{false} of 100 pure-noise series got a step"


def test_a_constant_series_and_a_short_one_give_none():
    assert changepoints.detect([1e-3] * 20) == []
    assert changepoints.detect([1e-3, 2e-3, 2e-3, 2e-3, 2e-3]) == []  # 5 runs: too few
    assert changepoints.detect([1e-3] * 6 + [0.0] * 6) == []  # a zero median is not a time


def test_a_step_below_the_smallest_change_is_not_reported():
    quiet = 1e-3 * (1 + 0.001 * np.random.default_rng(3).standard_normal(40))
    quiet[20:] *= 1.015
    assert changepoints.detect(quiet, min_change=0.01)  # significant at 0.1 % noise
    assert changepoints.detect(quiet) == []  # but below the default 2 %


def test_steps_name_the_run_and_commit_where_the_history_moved(tmp_path):
    folder = write_history(tmp_path, runs=24, step_at=12)
    runs = [load(path) for path in sorted(folder.glob("*.json"))]
    (step,) = changepoints.steps(runs, f"perf_tests/test_synthetic.py::{STEPPED}")
    assert step.run.path.name == "0013_nightly.json"
    assert step.previous.path.name == "0012_nightly.json"
    assert step.commit.startswith("0012c0ffee")
    assert 8.0 < step.change_percent < 12.0
    assert step.p_value < changepoints.ALPHA
    assert "0013_nightly.json" in step.describe() and "slower" in step.describe()
    assert changepoints.steps(runs, f"perf_tests/test_synthetic.py::{FLAT}") == []


def fake_run(index: int, median: float) -> SimpleNamespace:
    benchmark = SimpleNamespace(median=median)
    return SimpleNamespace(
        path=Path(f"{index:04d}.json"),
        datetime=f"2026-11-{1 + index:02d}T00:00:00",
        commit=f"{index:040d}",
        benchmarks={"creep": benchmark},
    )


def test_new_steps_lists_a_step_that_only_the_newest_run_made_visible():
    # 20 steady runs, then nights 8 % slower: the third slow night makes the step significant.
    medians = list(noisy(20, 5)) + list(noisy(4, 6) * 1.08)
    runs = [fake_run(i, m) for i, m in enumerate(medians)]
    assert (
        changepoints.new_steps(runs[:22], aware(runs[21].datetime), recorded_at) == []
    )  # 2 runs: too few
    (step,) = changepoints.new_steps(runs[:23], aware(runs[22].datetime), recorded_at)
    assert step.run.path.name == "0020.json" and step.change_percent > 5
    # the next night it is no longer new, but still a step of the whole history
    assert changepoints.new_steps(runs, aware(runs[23].datetime), recorded_at) == []
    (again,) = changepoints.new_steps(runs, aware(runs[22].datetime), recorded_at)
    assert again.run is step.run


def test_new_steps_of_no_runs_is_empty():
    assert changepoints.new_steps([], None, recorded_at) == []


def test_without_ruptures_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ruptures", None)
    with pytest.raises(StepsUnavailable, match="pip install ruptures"):
        changepoints.detect(noisy(12, 0))
