"""Tests for perfgate.stats on synthetic per-round durations (seconds) from seeded numpy."""

import math
import tracemalloc

import numpy as np
import pytest

from perfgate.stats import (
    MIN_ROUNDS,
    _resampled_medians,
    bootstrap_ratio_interval,
    compare_samples,
    mann_whitney_faster,
    mann_whitney_slower,
    median,
    smallest_p_value,
)


def lognormal_rounds(rng: np.random.Generator, n: int, cv: float, median_s: float = 1e-3):
    """``n`` per-round durations (seconds) with lognormal noise of coefficient of variation cv."""
    return median_s * rng.lognormal(0.0, math.sqrt(math.log1p(cv**2)), n)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def test_median():
    assert median([3e-3, 1e-3, 2e-3]) == 2e-3
    assert median([1e-3, 2e-3, 3e-3, 4e-3]) == pytest.approx(2.5e-3)


BAD_SAMPLES = {
    "empty": [],
    "nan": [1e-3, float("nan")],
    "inf": [1e-3, float("inf")],
    "zero": [1e-3, 0.0],
    "negative": [1e-3, -1e-3],
    "two-dimensional": [[1e-3, 2e-3]],
    "not numbers": ["fast", "slow"],
}


@pytest.mark.parametrize("case", sorted(BAD_SAMPLES))
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_rejects_bad_samples_naming_the_argument(case, side):
    good = [1e-3, 1.1e-3, 0.9e-3]
    args = {"baseline": good, "current": good, side: BAD_SAMPLES[case]}
    for function in (compare_samples, mann_whitney_slower, bootstrap_ratio_interval):
        with pytest.raises(ValueError, match=side):
            function(**args)


def test_rejects_bad_bootstrap_settings():
    samples = [1e-3, 1.1e-3, 0.9e-3]
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ratio_interval(samples, samples, confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_ratio_interval(samples, samples, resamples=10)


def test_mann_whitney_is_one_sided(rng):
    baseline = lognormal_rounds(rng, 30, 0.05)
    slower = lognormal_rounds(rng, 30, 0.05) * 1.3
    assert mann_whitney_slower(baseline, slower) < 1e-6
    assert mann_whitney_faster(baseline, slower) > 0.99
    assert mann_whitney_slower(slower, baseline) > 0.99
    assert mann_whitney_faster(slower, baseline) < 1e-6


def test_mann_whitney_all_ties_is_not_evidence():
    # A coarse clock can give identical rounds; scipy's statistic is then undefined.
    assert mann_whitney_slower([1e-3] * 20, [1e-3] * 20) == 1.0


def textbook_medians(samples: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Medians of resamples built in full: each round drawn with replacement, then np.median."""
    picks = np.random.default_rng(seed).integers(0, samples.size, (resamples, samples.size))
    return np.median(samples[picks], axis=1)


def test_resampled_medians_follow_the_textbook_bootstrap(rng):
    # drawn from the middle order statistics, not built: the same distribution (two-sample KS
    # on 20,000 medians each; a rank off by one at n=200 moves it by a seventh of its spread)
    from scipy.stats import ks_2samp

    for n in (1, 2, 3, 20, 21, 50, 200):
        samples = lognormal_rounds(rng, n, 0.2)
        samples[: n // 4] = samples[0]  # ties must not move the middle order statistics
        fast = _resampled_medians(samples, 20_000, np.random.default_rng(7))
        textbook = textbook_medians(samples, 20_000, seed=8)
        assert ks_2samp(fast, textbook).pvalue > 1e-3, n


def test_a_rank_off_by_one_would_be_seen(rng):
    # the check above has the power to see a wrong rank: the next order statistic fails it
    samples = np.sort(lognormal_rounds(rng, 200, 0.2))
    from scipy.stats import ks_2samp

    wrong = samples[
        np.minimum((np.random.default_rng(7).beta(101, 100, 20_000) * 200).astype(int), 199)
    ]
    assert ks_2samp(wrong, textbook_medians(samples, 20_000, seed=8)).pvalue < 1e-6


def test_bootstrap_interval_is_deterministic_and_brackets_the_ratio(rng):
    baseline = lognormal_rounds(rng, 40, 0.10)
    current = lognormal_rounds(rng, 40, 0.10) * 1.2
    low, high = bootstrap_ratio_interval(baseline, current, seed=3)
    assert (low, high) == bootstrap_ratio_interval(baseline, current, seed=3)
    assert (low, high) != bootstrap_ratio_interval(baseline, current, seed=4)
    assert low < np.median(current) / np.median(baseline) < high
    assert 1.0 < low < 1.2 < high
    narrower = bootstrap_ratio_interval(baseline, current, confidence=0.5, seed=3)
    assert low < narrower[0] < narrower[1] < high


@pytest.mark.parametrize("rounds", [(200, 151), (1500, 1499)])
def test_bootstrap_interval_is_the_textbook_bootstrap(rng, rounds):
    # the percentile interval of 20,000 ratios of medians, drawn vs built in full: the same
    # interval up to the Monte Carlo error of its 2.5 % and 97.5 % quantiles
    baseline, current = (lognormal_rounds(rng, n, 0.10) for n in rounds)
    baseline[:50] = baseline[0]
    ratios = textbook_medians(current, 20_000, 4) / textbook_medians(baseline, 20_000, 3)
    low, high = np.quantile(ratios, [0.025, 0.975])
    interval = bootstrap_ratio_interval(baseline, current, resamples=20_000, seed=3)
    assert interval == pytest.approx((low, high), rel=2e-3)


def test_compare_samples_fields(rng):
    baseline = lognormal_rounds(rng, 25, 0.05)
    current = lognormal_rounds(rng, 30, 0.05) * 2.0
    c = compare_samples(baseline, current)
    assert c.baseline_median == float(np.median(baseline))
    assert c.current_median == float(np.median(current))
    assert c.ratio == pytest.approx(c.current_median / c.baseline_median)
    assert c.change_percent == pytest.approx((c.ratio - 1.0) * 100.0)
    assert (c.n_baseline, c.n_current, c.enough_rounds) == (25, 30, True)
    assert c.p_value < 1e-6 and c.p_value_faster > 0.99
    assert 1.8 < c.ratio_low < c.ratio < c.ratio_high < 2.2
    assert "ms" in c.describe() and "%" in c.describe()


@pytest.mark.parametrize("rounds", [(1, 1), (1, 30), (30, 2), (2, 2)])
def test_tiny_samples_are_never_significant(rng, rounds):
    assert min(rounds) < MIN_ROUNDS
    baseline = lognormal_rounds(rng, rounds[0], 0.01)
    current = lognormal_rounds(rng, rounds[1], 0.01) * 10.0  # ten times slower, yet unknowable
    c = compare_samples(baseline, current)
    assert c.ratio > 5.0
    assert (c.p_value, c.p_value_faster) == (1.0, 1.0)
    assert (c.ratio_low, c.ratio_high) == (0.0, math.inf)
    assert not c.enough_rounds
    assert mann_whitney_slower(baseline, current) == 1.0


def test_comparing_two_hundred_thousand_rounds_takes_bounded_memory(rng):
    # issue 20: the bootstrap held resamples x rounds (2000 x 192,679 int64: 2.9 GiB per array)
    baseline = lognormal_rounds(rng, 200_000, 0.10)
    current = lognormal_rounds(rng, 200_000, 0.10) * 1.05
    tracemalloc.start()
    try:
        c = compare_samples(baseline, current)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"  # the inputs alone are 3 MiB
    assert c.ratio_low < c.ratio < c.ratio_high and 1.03 < c.ratio_low and c.ratio_high < 1.07
    assert c.p_value < 1e-10 and c.smallest_p == 0.0
    assert bootstrap_ratio_interval(baseline, current) == (c.ratio_low, c.ratio_high)


@pytest.mark.parametrize("counts, smallest", [((3, 3), 0.05), ((4, 4), 1 / 70), ((5, 5), 1 / 252),
                                              ((2, 100), 1.0), ((3, 40), 1 / 12341)])  # fmt: skip
def test_smallest_p_value_is_one_over_the_arrangements(counts, smallest):
    assert smallest_p_value(*counts) == pytest.approx(smallest)
    c = compare_samples([1.0] * counts[0], [2.0] * counts[1])
    assert c.smallest_p == pytest.approx(smallest)
    assert (c.round_ratio_low, c.round_ratio_high) == (2.0, 2.0)
