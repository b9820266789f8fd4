"""The regression rules: tiny classes whose ``fails()`` returns a message when the rule flags,
else None, and the thresholds they use (per family or test, from the command line or a marker)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real

from perfgate.stats import MIN_PAIRS, MIN_ROUNDS, Comparison, rounds_needed

DEFAULT_TIME_THRESHOLD = 0.10  # slower by more than 10 % of the baseline median
DEFAULT_ALPHA = 0.01  # one-sided Mann-Whitney significance level
DEFAULT_MEMORY_TOLERANCE = 0.01  # peak memory may grow by 1 %: it is not noisy
DEFAULT_RATIO_THRESHOLD = 0.10  # a same-run ratio may lose 10 % of its baseline value
TOO_FEW_ROUNDS = "too few rounds to decide"  # the not-gated reason, counted in the summary


def _check_fraction(value: float, name: str, upper: float = 1.0) -> float:
    """``value`` as a float in [0, upper]; thresholds are fractions (0.10 = 10 %), not percent."""
    if isinstance(value, bool) or not (isinstance(value, Real) and 0.0 <= value <= upper):
        raise ValueError(f"{name} must be a fraction in [0, {upper}] (0.10 = 10 %), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class _TimeRule:
    threshold: float = DEFAULT_TIME_THRESHOLD  # fraction of the baseline median
    alpha: float = DEFAULT_ALPHA  # one-sided significance level

    def __post_init__(self) -> None:
        _check_fraction(self.threshold, "threshold")
        _check_fraction(self.alpha, "alpha")

    def testable(self, c: Comparison) -> bool:
        """Whether these rounds can reach significance at all (Mann-Whitney needs 5 rounds a
        side for p < 0.01; the paired t-test 3 pairs)."""
        return c.smallest_p < self.alpha

    def untested(self, c: Comparison) -> str:
        return f"decided on {c.rounds} without a significance test"


# Deciding without a test, by simulation (lognormal rounds, threshold 10 %, one comparison, no
# re-run): the same distribution reads as a regression on 3 vs 3 rounds at 1e-4 of comparisons
# with 5 % noise per round, 0.4 % with 10 %, 2 % with 30 % (4 vs 4: 0, 0.05 %, 0.5 %); the gate
# then re-runs it, and both must fail. A 2x slowdown is caught every time up to 10 % noise; with
# more noise it is otherwise not gated, never unchanged.
def _decidable_without_test(c: Comparison) -> bool:
    return min(c.n_baseline, c.n_current) >= (MIN_PAIRS if c.paired else MIN_ROUNDS)


class TimeRegression(_TimeRule):
    """Slower than the baseline beyond ``threshold`` (fraction), and shown so: where the rounds
    can reach significance, ratio of medians > 1 + threshold, one-sided Mann-Whitney (paired:
    t-test) p < ``alpha`` and the ratio interval above 1; where they cannot, every current round
    slower than every baseline round (paired: every block pair) by more than the threshold."""

    def fails(self, comparison: Comparison) -> str | None:
        # Why both tests: the threshold is a size filter, not a test, and each test can be fooled
        # alone on a noisy machine. Mann-Whitney counts every round as independent evidence, so
        # a slow phase that shifts a block of rounds gives it a tiny p-value; the bootstrap
        # interval of a median is too narrow with few rounds. A false alarm must fool both at
        # once and pass the threshold, while a real slowdown past the threshold passes all three.
        c, limit = comparison, 1.0 + self.threshold
        if not self.testable(c):
            if not _decidable_without_test(c) or c.round_ratio_low <= limit:
                return None
            every = "every current block is slower than its pair" if c.paired else (
                "every current round is slower than every baseline round")  # fmt: skip
            return (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}): "
                f"{every} by at least {c.round_ratio_low - 1:.1%}, {self.untested(c)}: "
                f"{c.describe()}"
            )
        if c.ratio <= limit or c.p_value >= self.alpha or c.ratio_low <= 1.0:
            return None
        return (
            f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}, "
            f"p={c.p_value:.2g}): {c.describe()}"
        )

    def undecided(self, comparison: Comparison) -> str | None:
        """Why the rounds show neither a slowdown past the threshold nor its absence, or None:
        a median slower past the threshold without significance, or too few rounds for a test
        and rounds that overlap. Such a case is not gated: never called unchanged."""
        c, limit = comparison, 1.0 + self.threshold
        if self.fails(c) is not None:
            return None
        if self.testable(c):
            if c.ratio <= limit:
                return None
            return (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}) but not "
                f"significantly (p={c.p_value:.2g}, ratio {c.confidence:.0%} CI "
                f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]) on {c.rounds}: too noisy to decide"
            )
        if _decidable_without_test(c) and c.round_ratio_high <= limit:
            return None  # no current round is slower than any baseline round past the threshold
        return f"{TOO_FEW_ROUNDS} ({c.rounds}, needs {self._needs(c)})"

    def _needs(self, c: Comparison) -> str:
        if c.paired:
            return f"{MIN_PAIRS} pairs, {MIN_ROUNDS} for a t-test"
        if not _decidable_without_test(c):
            return f"{MIN_ROUNDS} a side"
        return f"{rounds_needed(self.alpha)} a side for p < {self.alpha:g}"


class TimeImprovement(_TimeRule):
    """Mirror of ``TimeRegression``: ratio < 1 - threshold, one-sided "faster" p < ``alpha``,
    interval below 1; without a possible test, every current round faster than every baseline
    round by more than the threshold."""

    def fails(self, comparison: Comparison) -> str | None:
        c = comparison
        if not self.testable(c):
            if not _decidable_without_test(c) or c.round_ratio_high >= 1.0 - self.threshold:
                return None
            return f"faster by {-c.change_percent:.1f}%, {self.untested(c)}: {c.describe()}"
        if c.ratio >= 1.0 - self.threshold or c.p_value_faster >= self.alpha or c.ratio_high >= 1:
            return None
        return f"faster by {-c.change_percent:.1f}% (p={c.p_value_faster:.2g}): {c.describe()}"


@dataclass(frozen=True)
class MemoryRegression:
    """Peak memory (bytes) grew by more than ``tolerance`` (fraction). No statistics: a peak is
    deterministic for a given program and allocator, so any growth past the tolerance is real."""

    tolerance: float = DEFAULT_MEMORY_TOLERANCE

    def __post_init__(self) -> None:
        _check_fraction(self.tolerance, "tolerance")

    def fails(self, baseline_bytes: int, current_bytes: int) -> str | None:
        for name, value in (("baseline_bytes", baseline_bytes), ("current_bytes", current_bytes)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                raise ValueError(f"{name} must be a non-negative int (bytes), got {value!r}")
        if current_bytes <= baseline_bytes * (1.0 + self.tolerance):
            return None
        growth = f"+{current_bytes / baseline_bytes - 1:.1%}" if baseline_bytes else "was 0"
        return f"peak memory {current_bytes:,} B vs baseline {baseline_bytes:,} B ({growth})"


@dataclass(frozen=True)
class RatioRegression:
    """A same-run ratio lost more than ``threshold`` (fraction) of its baseline value: with
    ``higher_is_better`` (speedups, fractions of roofline) current/baseline < 1 - threshold,
    else (latency ratios such as MXINT8/FP32) baseline/current < 1 - threshold. Each ratio is
    measured within one run, so drift cancels: a collapse counts even if both times moved."""

    threshold: float = DEFAULT_RATIO_THRESHOLD
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        _check_fraction(self.threshold, "threshold", upper=0.999)

    def fails(self, baseline: float, current: float, name: str = "ratio") -> str | None:
        for arg, value in (("baseline", baseline), ("current", current)):
            if not (isinstance(value, Real) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} {arg} must be a finite positive number, got {value!r}")
        kept = current / baseline if self.higher_is_better else baseline / current
        if kept >= 1.0 - self.threshold:
            return None
        better = "higher" if self.higher_is_better else "lower"
        change = f"{current / baseline - 1:+.1%}, {better} is better"
        return f"{name} {current:.4g} vs baseline {baseline:.4g} ({change})"


@dataclass(frozen=True)
class Thresholds:
    """Time threshold (fraction) per family or test name with a global default; also the
    significance level, the memory tolerance and the default same-run-ratio threshold.

    ``default`` None means none was given: each case then gets a threshold from its measured
    noise (``verdict.noise``), or DEFAULT_TIME_THRESHOLD.

    ``by_name`` keys are lower case: ``--perf-gate-threshold=SDPA=0.2`` and ``sdpa=0.2`` agree.
    """

    default: float | None = None
    by_name: Mapping[str, float] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA
    memory_tolerance: float = DEFAULT_MEMORY_TOLERANCE
    ratio: float = DEFAULT_RATIO_THRESHOLD

    def __post_init__(self) -> None:
        fractions = {"alpha": self.alpha, "ratio": self.ratio}
        if self.default is not None:
            fractions["default"] = self.default
        fractions.update({f"threshold of {k!r}": v for k, v in self.by_name.items()})
        for name, value in fractions.items():
            _check_fraction(value, name, upper=0.999 if name == "ratio" else 1.0)
        _check_fraction(self.memory_tolerance, "memory_tolerance")

    def unknown_names(self, known: Iterable[str]) -> list[str]:
        """Names given a threshold that match no family or test in ``known`` (any case)."""
        lowered = {name.lower() for name in known}
        return sorted(name for name in self.by_name if name not in lowered)


def parse_fraction(text: str) -> float:
    """A threshold as the gate takes it: ``10%`` or ``0.1`` (a fraction) are 10 %; a bare
    number above 1 (``10``) is ambiguous and refused. ValueError with one line."""
    value = str(text).strip()
    percent = value.endswith("%")
    try:
        number = float(value.removesuffix("%").strip())
    except ValueError:
        raise ValueError(f"threshold {text!r}: expected a fraction or a percentage, e.g. 0.1 "
                         "or 10%") from None  # fmt: skip
    if not percent and number > 1:
        raise ValueError(f"threshold {text!r} is ambiguous: write {value}% or {number / 100:g}")
    return number / 100.0 if percent else number


def parse_thresholds(specs: Iterable[str], alpha: float = DEFAULT_ALPHA) -> Thresholds:
    """Thresholds from ``[NAME=]FRACTION`` strings: ``0.15`` or ``15%`` for every benchmark,
    ``sdpa=0.2`` for a family or a test function. ValueError with one line saying what is wrong
    (``15`` alone is ambiguous: 15 % or 0.15?)."""
    default, by_name = None, {}
    for spec in specs:
        name, _, value = str(spec).rpartition("=")
        try:
            fraction = parse_fraction(value)
        except ValueError as error:
            raise ValueError(
                f"{error} (as FRACTION or NAME=FRACTION, e.g. 0.15 or sdpa=20%)"
            ) from None
        if name:
            by_name[name.strip().lower()] = fraction
        else:
            default = fraction
    return Thresholds(default=default, by_name=by_name, alpha=alpha)


def threshold_for(test: str, family: str | None, marker: float | None, t: Thresholds) -> float:
    """Time threshold (fraction) of one benchmark: its marker's, else one given for its test
    function, else for its family, else the default given (else DEFAULT_TIME_THRESHOLD)."""
    if marker is not None:
        return _check_fraction(marker, f"threshold marker of {test}")
    for name in (test, family):
        if name is not None and name.lower() in t.by_name:
            return float(t.by_name[name.lower()])
    return DEFAULT_TIME_THRESHOLD if t.default is None else t.default
