"""Statistics for comparing two sets of per-round benchmark durations.

Every function takes sequences of per-round durations in seconds (what pytest-benchmark stores
as ``stats.data``) and is pure: no I/O, no global random state. Ratios are current / baseline,
so a ratio above 1 means the current run is slower.

Memory and time do not grow with the product of rounds and resamples: Mann-Whitney is scipy's
(ranks, O(n log n)), and the bootstrap draws each resample's median directly (two draws, not n),
from at most ``BOOTSTRAP_POINTS`` rounds a side (docs/reference/verdicts.md; tests/test_stats.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.format import fmt_percent, fmt_time

# Fewer rounds than this on either side and no comparison is ever called significant: p-value
# 1.0 and an unbounded ratio interval. With 1-2 rounds a median is one or two draws of the noise,
# and even with 3 rounds on each side the smallest possible one-sided Mann-Whitney p-value is
# 1/20 = 0.05; reaching p < 0.01 takes at least 5 rounds on each side (1/252).
MIN_ROUNDS = 3
# Paired blocks (perfgate ab): the t-test needs 3 pairs, and nothing decides on fewer: two pairs
# of blocks that scatter by +-30 % both read "slower" one time in four (verdict.time_change).
MIN_PAIRS = MIN_ROUNDS

# The ratio interval reported when there are too few rounds: "anything is possible".
UNBOUNDED_INTERVAL = (0.0, math.inf)

# Beyond this many rounds a side, the bootstrap resamples a subsample of this size, drawn once
# with the bootstrap's seed. The interval is then that of a median of BOOTSTRAP_POINTS rounds:
# wider than the full run's (by sqrt(rounds / BOOTSTRAP_POINTS)), so on the safe side for the
# gate, and already narrow: with 10 % noise per round its half-width is about 0.6 %.
BOOTSTRAP_POINTS = 2000
EXACT_MANN_WHITNEY = 1000  # rounds a side up to which scipy may compute the exact p-value

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


def _enough_rounds(baseline: np.ndarray, current: np.ndarray) -> bool:
    return min(baseline.size, current.size) >= MIN_ROUNDS


def smallest_p_value(n_baseline: int, n_current: int) -> float:
    """The smallest one-sided Mann-Whitney p-value that ``n_baseline`` and ``n_current`` rounds
    can give (every current round above every baseline round): 1 / C(n_b + n_c, n_b); 1.0 below
    ``MIN_ROUNDS`` a side. 3 vs 3 rounds give at best 0.05, 4 vs 4 0.014, 5 vs 5 0.004."""
    if min(n_baseline, n_current) < MIN_ROUNDS:
        return 1.0
    if min(n_baseline, n_current) > 30:  # below 1e-17 already; C(n, k) itself is costly
        return 0.0
    return 1.0 / math.comb(n_baseline + n_current, n_baseline)


def rounds_needed(alpha: float, n_baseline: int | None = None) -> int:
    """Rounds a side (or, given ``n_baseline``, current rounds) for p < ``alpha`` to be possible."""
    n = MIN_ROUNDS
    while smallest_p_value(n_baseline or n, n) >= alpha:
        n += 1
    return n


def _mann_whitney(baseline: Samples, current: Samples, alternative: str) -> float:
    base = as_samples(baseline, "baseline")
    curr = as_samples(current, "current")
    if not _enough_rounds(base, curr):
        return 1.0
    # scipy's exact distribution takes minutes against thousands of rounds: normal there
    method = "auto" if max(base.size, curr.size) <= EXACT_MANN_WHITNEY else "asymptotic"
    from scipy import stats  # here: importing it costs a run that compares nothing 1.5 s

    test = stats.mannwhitneyu(curr, base, alternative=alternative, method=method)
    p_value = float(test.pvalue)
    # All rounds tied (e.g. a coarse clock) gives no evidence either way.
    return 1.0 if math.isnan(p_value) else p_value


def mann_whitney_slower(baseline: Samples, current: Samples) -> float:
    """One-sided Mann-Whitney p-value that ``current`` is slower; 1.0 below MIN_ROUNDS."""
    return _mann_whitney(baseline, current, "greater")


def mann_whitney_faster(baseline: Samples, current: Samples) -> float:
    """One-sided Mann-Whitney p-value that ``current`` is faster; 1.0 below MIN_ROUNDS."""
    return _mann_whitney(baseline, current, "less")


def _resampled_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` bootstrap resamples (with replacement) of ``samples``, drawn
    without building the resamples.

    A resample of n rounds takes the sorted samples at positions floor(n * U_i), U_i uniform on
    [0, 1), so its k-th smallest round sits at floor(n * U_(k)). The k-th smallest of n uniforms is
    Beta(k, n + 1 - k), and the next one up is the smallest of the n - k uniforms above it. The
    two middle order statistics are then two draws per resample instead of n: the same
    distribution as the textbook bootstrap, at a cost that does not grow with the rounds.
    """
    n = samples.size
    ordered = np.sort(samples)
    k = (n + 1) // 2  # rank (from 1) of the lower middle round; the median itself when n is odd
    lower = rng.beta(k, n + 1 - k, resamples)
    upper = lower
    if n % 2 == 0:  # the upper middle: the smallest of the n - k uniforms above the lower one
        upper = lower + (1.0 - lower) * (1.0 - rng.random(resamples) ** (1.0 / (n - k)))

    def rounds_at(u: np.ndarray) -> np.ndarray:
        return ordered[np.minimum((u * n).astype(np.int64), n - 1)]

    return 0.5 * (rounds_at(lower) + rounds_at(upper))


def _at_most(samples: np.ndarray, points: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` itself, or ``points`` of them drawn without replacement."""
    return samples if samples.size <= points else rng.choice(samples, points, replace=False)


def bootstrap_ratio_interval(
    baseline: Samples,
    current: Samples,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(current) / median(baseline) (dimensionless).

    Each side is resampled with replacement independently, ``resamples`` times; a side with more
    than ``BOOTSTRAP_POINTS`` rounds is first subsampled to that many (a wider interval, never a
    narrower one). The same ``seed`` gives the same interval. With fewer than ``MIN_ROUNDS``
    rounds on either side it returns ``UNBOUNDED_INTERVAL`` (0, inf), which excludes nothing.
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
    if max(base.size, curr.size) > BOOTSTRAP_POINTS:  # drawn from their own stream
        thin = np.random.default_rng([seed, 1])
        base, curr = _at_most(base, BOOTSTRAP_POINTS, thin), _at_most(curr, BOOTSTRAP_POINTS, thin)
    base_medians = _resampled_medians(base, resamples, rng)
    curr_medians = _resampled_medians(curr, resamples, rng)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(curr_medians / base_medians, [tail, 1.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Comparison:
    """Current rounds compared with baseline rounds.

    Medians are in seconds; ``ratio`` = current_median / baseline_median (above 1 is slower);
    ``change_percent`` = (ratio - 1) * 100. ``p_value`` is the one-sided Mann-Whitney p-value that
    current is slower, ``p_value_faster`` that it is faster (1.0 without computing it when the
    current median is not lower). ``ratio_low``/``ratio_high`` bound the ratio (bootstrap,
    ``confidence``). When ``enough_rounds`` is False (fewer than ``MIN_ROUNDS`` rounds on a side)
    both p-values are 1.0 and the interval is (0, inf), so no rule built on them can ever call the
    difference significant. ``smallest_p`` is the smallest p-value these counts can give at all.
    ``round_ratio_low``/``round_ratio_high`` are the least and greatest ratio of any current round
    to any baseline round (min(current) / max(baseline), max(current) / min(baseline)): what the
    rounds show without a test. ``fastest_ratio`` is min(current) / min(baseline): how the fastest
    rounds moved (a busy machine runs a case slowly more often; it rarely slows its fastest rounds,
    a change of its code does).
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
    smallest_p: float = 0.0
    round_ratio_low: float = 0.0
    round_ratio_high: float = math.inf
    paired: bool = False
    fastest_ratio: float = math.nan
    tested: int = 1  # cases tested together (``verdict.family``): the p-values are adjusted
    p_raw: float | None = None  # the slower p-value before that adjustment

    @property
    def rounds(self) -> str:
        """'4 baseline and 4 current rounds', or '2 block pairs'."""
        if self.paired:
            return f"{self.n_baseline} block pairs"
        return f"{self.n_baseline} baseline and {self.n_current} current rounds"

    def describe(self) -> str:
        """One line for humans: both medians (``format.fmt_time``), % change, ratio interval,
        round counts."""
        interval = (
            f"ratio {self.confidence:.0%} CI [{self.ratio_low:.3f}, {self.ratio_high:.3f}]"
            if math.isfinite(self.ratio_high)
            else "no ratio interval at these counts"
        )
        return (
            f"median {fmt_time(self.current_median)} vs baseline {fmt_time(self.baseline_median)} "
            f"({fmt_percent(self.change_percent / 100, signed=True)}), {interval}, "
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
        # only a lower median can be an improvement: the second ranking is saved otherwise
        p_value_faster=mann_whitney_faster(base, curr) if ratio < 1.0 else 1.0,
        ratio_low=low,
        ratio_high=high,
        n_baseline=int(base.size),
        n_current=int(curr.size),
        confidence=confidence,
        enough_rounds=_enough_rounds(base, curr),
        smallest_p=smallest_p_value(base.size, curr.size),
        round_ratio_low=float(curr.min() / base.max()),
        round_ratio_high=float(curr.max() / base.min()),
        fastest_ratio=float(curr.min() / base.min()),
    )


def medians_only(baseline_median: float, current_median: float) -> Comparison:
    """Two medians compared without their rounds (a run saved without per-round data, as
    pytest-benchmark saves by default): the ratio and the change, nothing significant."""
    ratio = current_median / baseline_median
    low, high = UNBOUNDED_INTERVAL
    return Comparison(
        baseline_median=baseline_median,
        current_median=current_median,
        ratio=ratio,
        change_percent=(ratio - 1.0) * 100.0,
        p_value=1.0,
        p_value_faster=1.0,
        ratio_low=low,
        ratio_high=high,
        n_baseline=0,
        n_current=0,
        enough_rounds=False,
        smallest_p=1.0,
    )
