"""Statistics for comparing two sets of per-round benchmark durations.

Every function takes sequences of per-round durations in seconds (what pytest-benchmark stores
as ``stats.data``) and is pure: no I/O, no global random state. Ratios are current / baseline,
so a ratio above 1 means the current run is slower.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

# Fewer rounds than this on either side and no comparison is ever called significant: p-value
# 1.0 and an unbounded ratio interval. With 1-2 rounds a median is one or two draws of the noise,
# and even with 3 rounds on each side the smallest possible one-sided Mann-Whitney p-value is
# 1/20 = 0.05; reaching p < 0.01 takes at least 5 rounds on each side (1/252).
MIN_ROUNDS = 3

# The ratio interval reported when there are too few rounds: "anything is possible".
UNBOUNDED_INTERVAL = (0.0, math.inf)

Samples = Sequence[float] | np.ndarray


def as_samples(samples: Samples, name: str = "samples") -> np.ndarray:
    """Validated 1-D float64 array of per-round durations (seconds).

    Raises ``ValueError`` naming ``name`` when the samples are empty, not one-dimensional, or
    hold a value that is not finite or not positive (a duration of 0 s is a broken timer).
    """
    try:
        array = np.asarray(samples, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a sequence of numbers, got {samples!r}") from error
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: at least one round is needed")
    bad = ~np.isfinite(array) | (array <= 0)
    if bad.any():
        index = int(np.argmax(bad))
        raise ValueError(
            f"{name} must hold finite positive durations (seconds); "
            f"{name}[{index}] = {array[index]!r}"
        )
    return array


def median(samples: Samples) -> float:
    """Median of per-round durations (seconds)."""
    return float(np.median(as_samples(samples)))


@dataclass(frozen=True)
class SampleSummary:
    """Median and interquartile range (seconds) of ``n`` rounds."""

    median: float
    iqr: float
    n: int

    @property
    def relative_iqr(self) -> float:
        """IQR / median: a robust coefficient of variation (dimensionless)."""
        return self.iqr / self.median


def summarize(samples: Samples) -> SampleSummary:
    """Median, IQR (seconds) and round count of per-round durations."""
    array = as_samples(samples)
    q1, q2, q3 = np.percentile(array, [25, 50, 75])
    return SampleSummary(median=float(q2), iqr=float(q3 - q1), n=int(array.size))


def _enough_rounds(baseline: np.ndarray, current: np.ndarray) -> bool:
    return min(baseline.size, current.size) >= MIN_ROUNDS


def _mann_whitney(baseline: Samples, current: Samples, alternative: str) -> float:
    base = as_samples(baseline, "baseline")
    curr = as_samples(current, "current")
    if not _enough_rounds(base, curr):
        return 1.0
    p_value = float(_scipy_stats.mannwhitneyu(curr, base, alternative=alternative).pvalue)
    # All rounds tied (e.g. a coarse clock) gives no evidence either way.
    return 1.0 if math.isnan(p_value) else p_value


def mann_whitney_slower(baseline: Samples, current: Samples) -> float:
    """One-sided Mann-Whitney U p-value that ``current`` durations are larger (slower).

    Returns 1.0 when either side has fewer than ``MIN_ROUNDS`` rounds.
    """
    return _mann_whitney(baseline, current, "greater")


def mann_whitney_faster(baseline: Samples, current: Samples) -> float:
    """One-sided Mann-Whitney U p-value that ``current`` durations are smaller (faster).

    Returns 1.0 when either side has fewer than ``MIN_ROUNDS`` rounds.
    """
    return _mann_whitney(baseline, current, "less")


def _resampled_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` bootstrap resamples (with replacement) of ``samples``.

    Works on the sorted samples: a resample is a count per sorted position, and its median sits
    where the running count first passes the middle. That is a cumulative sum instead of a
    partition per resample, several times faster than ``np.median`` on the gathered rows.
    """
    n = samples.size
    ordered = np.sort(samples)
    picks = rng.integers(0, n, (resamples, n)) + n * np.arange(resamples)[:, None]
    counts = np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n)
    running = np.cumsum(counts, axis=1)
    # 0-based positions of the lower and upper middle order statistics (equal when n is odd).
    lower = np.count_nonzero(running <= (n - 1) // 2, axis=1)
    upper = np.count_nonzero(running <= n // 2, axis=1)
    return 0.5 * (ordered[lower] + ordered[upper])


def bootstrap_ratio_interval(
    baseline: Samples,
    current: Samples,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline) (dimensionless).

    Each side is resampled with replacement independently, ``resamples`` times, all at once in
    numpy; the same ``seed`` gives the same interval. With fewer than ``MIN_ROUNDS`` rounds on
    either side it returns ``UNBOUNDED_INTERVAL`` (0, inf), which excludes nothing.
    """
    base = as_samples(baseline, "baseline")
    curr = as_samples(current, "current")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if resamples < 100:
        raise ValueError(f"resamples must be at least 100, got {resamples!r}")
    if not _enough_rounds(base, curr):
        return UNBOUNDED_INTERVAL
    rng = np.random.default_rng(seed)
    base_medians = _resampled_medians(base, resamples, rng)
    curr_medians = _resampled_medians(curr, resamples, rng)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(curr_medians / base_medians, [tail, 1.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Comparison:
    """Current rounds compared with baseline rounds.

    Medians are in seconds; ``ratio`` = current_median / baseline_median (above 1 is slower);
    ``change_percent`` = (ratio - 1) * 100. ``p_value`` is the one-sided Mann-Whitney p-value
    that current is slower, ``p_value_faster`` that it is faster. ``ratio_low``/``ratio_high``
    bound the ratio (bootstrap, ``confidence``). When ``enough_rounds`` is False (fewer than
    ``MIN_ROUNDS`` rounds on a side) both p-values are 1.0 and the interval is (0, inf), so no
    rule built on them can ever call the difference significant.
    """

    baseline_median: float
    current_median: float
    ratio: float
    change_percent: float
    p_value: float
    p_value_faster: float
    ratio_low: float
    ratio_high: float
    n_baseline: int
    n_current: int
    confidence: float = 0.95
    enough_rounds: bool = True

    def describe(self) -> str:
        """One line for humans: both medians (ms), % change, ratio interval, round counts."""
        return (
            f"median {self.current_median * 1e3:.4g} ms vs baseline "
            f"{self.baseline_median * 1e3:.4g} ms ({self.change_percent:+.1f}%), ratio "
            f"{self.confidence:.0%} CI [{self.ratio_low:.3f}, {self.ratio_high:.3f}], "
            f"n={self.n_current}/{self.n_baseline}"
        )


def compare_samples(
    baseline: Samples,
    current: Samples,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare per-round durations (seconds) of a baseline and a current run.

    Raises ``ValueError`` naming ``baseline`` or ``current`` when either is empty or holds a
    non-finite or non-positive duration.
    """
    base = as_samples(baseline, "baseline")
    curr = as_samples(current, "current")
    base_median = float(np.median(base))
    curr_median = float(np.median(curr))
    ratio = curr_median / base_median
    low, high = bootstrap_ratio_interval(base, curr, confidence, resamples, seed)
    return Comparison(
        baseline_median=base_median,
        current_median=curr_median,
        ratio=ratio,
        change_percent=(ratio - 1.0) * 100.0,
        p_value=mann_whitney_slower(base, curr),
        p_value_faster=mann_whitney_faster(base, curr),
        ratio_low=low,
        ratio_high=high,
        n_baseline=int(base.size),
        n_current=int(curr.size),
        confidence=confidence,
        enough_rounds=_enough_rounds(base, curr),
    )


def compare_paired_blocks(
    baseline_blocks: Samples, current_blocks: Samples, confidence: float = 0.95
) -> Comparison:
    """Compare per-block medians (seconds) of two trees run in alternating blocks (``perfgate
    ab``): block i of the baseline was run next to block i of the current tree.

    Pairing cancels drift that both blocks of a pair share. ``ratio`` is the geometric mean of
    the per-block ratios current/baseline; the p-values are one-sided one-sample t-tests on
    their logs, and the interval is the t interval of that mean, as a ratio. With fewer than
    ``MIN_ROUNDS`` pairs nothing is significant (p 1.0, interval (0, inf)).
    """
    base = as_samples(baseline_blocks, "baseline_blocks")
    curr = as_samples(current_blocks, "current_blocks")
    if base.size != curr.size:
        raise ValueError(f"{base.size} baseline blocks but {curr.size} current blocks: pair them")
    logs = np.log(curr / base)
    ratio = float(np.exp(logs.mean()))
    enough = base.size >= MIN_ROUNDS
    p_slower = p_faster = 1.0
    low, high = UNBOUNDED_INTERVAL
    spread = float(np.std(logs, ddof=1)) if enough else 0.0
    if enough and spread > 0:
        t = _scipy_stats.ttest_1samp(logs, 0.0, alternative="greater")
        p_slower, p_faster = float(t.pvalue), float(1.0 - t.pvalue)
        half = _scipy_stats.t.ppf(0.5 + confidence / 2, base.size - 1) * spread / np.sqrt(base.size)
        low, high = float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))
    elif enough:  # every pair gave the same ratio: exact
        p_slower, p_faster = (0.0, 1.0) if ratio > 1 else (1.0, 0.0) if ratio < 1 else (1.0, 1.0)
        low = high = ratio
    return Comparison(
        baseline_median=float(np.median(base)),
        current_median=float(np.median(curr)),
        ratio=ratio,
        change_percent=(ratio - 1.0) * 100.0,
        p_value=p_slower,
        p_value_faster=p_faster,
        ratio_low=low,
        ratio_high=high,
        n_baseline=int(base.size),
        n_current=int(curr.size),
        confidence=confidence,
        enough_rounds=enough,
    )
