"""The verdict at any number of rounds (issue 20): from 1 to 100,000 rounds a side, a 2x slowdown
is a regression, or undecided with the reason; the same distribution on both sides is never a
regression (nor an improvement). Below the rounds a significance test needs (5 a side for
p < 0.01), the rule decides on what the rounds show. The same for ``perfgate ab``'s block pairs
and ``perfgate bisect``'s steps, which decide through the same rules."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import entry, rounds, run_json, single

from perfgate.ab.bisect_steps import BAD, GOOD, SKIP
from perfgate.ab.bisect_steps import judge as bisect_judge
from perfgate.benchmark import Benchmark
from perfgate.session.baseline import GATE_NOT_RUN
from perfgate.stats import MIN_PAIRS, MIN_ROUNDS, compare_samples, rounds_needed
from perfgate.verdict import Thresholds, Verdict, judge
from perfgate.verdict.paired import judge_pairs
from perfgate.verdict.reason import Reason
from perfgate.verdict.time_change import TOO_FEW_ROUNDS, TimeRegression

COUNTS = [1, 2, 3, 4, 5, 6, 8, 10, 30, 100, 1_000, 10_000, 100_000]


def verdict(n_baseline: int, n_current: int, slowdown: float, seed: int, cv: float = 0.05):
    """The gate's verdict, re-run included, on lognormal rounds of ``cv`` noise."""
    baseline = single("t", rounds(seed, n=n_baseline, cv=cv))
    current = single("t", rounds(seed + 1, slowdown, n=n_current, cv=cv))
    again = single("t", rounds(seed + 2, slowdown, n=n_current, cv=cv))
    (result,) = judge([baseline], current, None, again)
    return result


@pytest.mark.parametrize("n", COUNTS)
def test_a_2x_slowdown_is_a_regression_at_every_count_it_can_be_decided(n):
    result = verdict(n, n, 2.0, seed=10 * n)
    if n < MIN_ROUNDS:
        assert result.verdict is Verdict.UNDECIDED, result.message
        assert f"{TOO_FEW_ROUNDS} ({n} baseline and {n} current rounds, needs 3" in result.message
        return
    assert result.verdict is Verdict.REGRESSION, result.message
    untested = n < rounds_needed(0.01)
    assert ("without a significance test" in result.message) == untested, result.message


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("cv", [0.01, 0.05, 0.3])
def test_an_unchanged_pair_is_never_a_regression(n, cv):
    for seed in range(3) if n <= 1_000 else range(1):
        result = verdict(n, n, 1.0, seed=100 * seed + n, cv=cv)
        assert result.verdict in (Verdict.UNCHANGED, Verdict.UNDECIDED, Verdict.NOT_GATED), (
            result.message
        )
        if result.verdict is not Verdict.UNCHANGED:  # always with the reason
            assert result.reason in (Reason.TOO_FEW_ROUNDS, Reason.WIDE_INTERVAL,
                                     Reason.NOT_SIGNIFICANT, Reason.TOO_NOISY), (
                result.message
            )  # fmt: skip


@pytest.mark.parametrize("counts", [(3, 1_000), (1_000, 3), (4, 100_000), (100_000, 4)])
def test_unequal_counts(counts):
    assert verdict(*counts, 2.0, seed=7).verdict is Verdict.REGRESSION
    assert verdict(*counts, 1.0, seed=7).verdict is not Verdict.REGRESSION


def test_rounds_that_overlap_are_not_gated_with_the_rounds_needed():
    c = compare_samples([1.0, 1.1, 1.2, 1.3], [1.25, 2.0, 2.1, 2.2])  # 4 a side, overlapping
    reason = TimeRegression(0.1).undecided(c)
    assert reason == (
        Reason.TOO_FEW_ROUNDS,
        f"{TOO_FEW_ROUNDS} (4 baseline and 4 current rounds, needs 5 a side for p < 0.01)",
    )
    assert rounds_needed(0.01) == 5 and rounds_needed(0.05) == 4 and rounds_needed(0.1) == 3


def test_a_slowdown_past_the_threshold_without_significance_is_undecided_or_too_noisy():
    # 30 rounds a side, noise so wide that +20 % of the median is not significant
    result = verdict(30, 30, 1.2, seed=3, cv=2.0)
    assert result.verdict in (Verdict.UNDECIDED, Verdict.NOT_GATED)
    assert "but not significantly" in result.message or "too noisy" in result.message


# --- perfgate ab: block pairs ------------------------------------------------------------------
def blocks(n_pairs: int, slowdown: float, seed: int) -> list[tuple[Benchmark, Benchmark]]:
    """``n_pairs`` (A block, B block) of 10 rounds, with drift that each pair shares."""
    rng = np.random.default_rng(seed)
    pairs = []
    for index in range(n_pairs):
        drift = rng.uniform(0.8, 1.3)
        a, b = (tuple(rounds(seed + 2 * index + k, s, n=10, cv=0.02)) for k, s in
                ((0, drift), (1, drift * slowdown)))  # fmt: skip
        pairs.append((Benchmark("x::t", "t", samples=a), Benchmark("x::t", "t", samples=b)))
    return pairs


@pytest.mark.parametrize("n_pairs", [1, 2, 3, 5, 10, 100])
def test_paired_blocks_at_every_count(n_pairs):
    """Block pairs are decided by their t-test alone: below 3 pairs, undecided."""
    slower = judge_pairs("x::t", blocks(n_pairs, 2.0, seed=n_pairs), Thresholds(0.1))
    same = judge_pairs("x::t", blocks(n_pairs, 1.0, seed=n_pairs), Thresholds(0.1))
    assert same.verdict in (Verdict.UNCHANGED, Verdict.UNDECIDED), same.message
    if n_pairs < MIN_PAIRS:
        assert slower.verdict is Verdict.UNDECIDED and TOO_FEW_ROUNDS in slower.message
        assert same.verdict is Verdict.UNDECIDED
        return
    assert slower.verdict is Verdict.REGRESSION, slower.message
    assert "without a significance test" not in slower.message


# --- perfgate bisect ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 4, 5, 100, 10_000])
def test_bisect_steps_at_every_count(tmp_path, n):
    def saved(name: str, slowdown: float, seed: int):
        path = tmp_path / f"{name}.json"
        samples = rounds(seed, slowdown, n=n)
        path.write_text(json.dumps(run_json(entry("bench/test_x.py::test_x", samples))))
        return path

    good = saved("good", 1.0, 1)
    slower, _ = bisect_judge(good, saved("slower", 2.0, 2), 0.1, 0.01)
    same, _ = bisect_judge(good, saved("same", 1.0, 3), 0.1, 0.01)
    assert same in (GOOD, SKIP)
    assert slower == (BAD if n >= MIN_ROUNDS else SKIP)


# --- the reproduction, as a user runs it -------------------------------------------------
FOUR_ROUNDS = """
from virtual_clock import work

def test_work(benchmark):
    benchmark.pedantic(work, rounds=4, iterations=1, warmup_rounds=0)
"""


@pytest.mark.slow
def test_a_five_times_slowdown_in_four_rounds_fails_the_gate(pytester, monkeypatch):
    from helpers import run, saved_runs, virtual_clock_project

    project = virtual_clock_project(pytester, monkeypatch, test_four=FOUR_ROUNDS)
    for _ in range(2):  # a baseline set of two runs
        assert run(project, "--benchmark-save=base").ret == 0
    same = run(project, "--perf-gate")
    assert same.ret == 0 and "1 gated (1 unchanged)" in same.stdout.str()
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.010")  # 5x slower
    slower = run(project, "--perf-gate")
    assert slower.ret == 1, slower.stdout.str()
    untested = "*decided on 4 baseline and 4 current rounds without a significance test*"
    slower.stdout.fnmatch_lines(["*1 gated (1 regression)*", untested])
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    for path in saved_runs(project):  # a baseline 100x faster than the code is now
        data = json.loads(path.read_text())
        for saved in data["benchmarks"]:
            saved["stats"]["data"] = [x / 100 for x in saved["stats"]["data"]]
        path.write_text(json.dumps(data))
    faster_baseline = run(project, "--perf-gate")
    assert faster_baseline.ret == 1 and "1 regression" in faster_baseline.stdout.str()


def test_a_session_where_no_case_has_rounds_enough_exits_6(pytester, monkeypatch):
    from helpers import run, virtual_clock_project

    two = FOUR_ROUNDS.replace("rounds=4", "rounds=2")
    project = virtual_clock_project(pytester, monkeypatch, test_two=two)
    assert run(project, "--benchmark-save=base").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.010")  # 5x slower, in 2 rounds: unknowable
    result = run(project, "--perf-gate")
    assert result.ret == GATE_NOT_RUN, result.stdout.str()
    result.stdout.fnmatch_lines(["*0 gated; 1 undecided (1 too few rounds to decide)*",
                                 "*perfgate gate could not run: nothing was gated*"])  # fmt: skip
