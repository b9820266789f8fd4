"""Regression rules and the gate. Rules are tiny classes whose ``fails()`` returns a message when
the rule flags, else None; ``gate_results`` applies them to ``BenchmarkPair`` rows and returns
``GateResult`` rows sorted worst first; ``exit_status`` turns those into a process exit code."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from numbers import Integral, Real

from perfgate.counters import DEFAULT_TOLERANCE, counter_findings, function_diff
from perfgate.stats import Comparison, Samples, as_samples, compare_samples

DEFAULT_TIME_THRESHOLD = 0.10  # slower by more than 10 % of the baseline median
DEFAULT_ALPHA = 0.01  # one-sided Mann-Whitney significance level
DEFAULT_MEMORY_TOLERANCE = 0.01  # peak memory may grow by 1 %: it is not noisy
DEFAULT_RATIO_THRESHOLD = 0.10  # a same-run ratio may lose 10 % of its baseline value


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


class TimeRegression(_TimeRule):
    """Slower than the baseline beyond ``threshold`` (fraction) and significantly so: ratio of
    medians > 1 + threshold, one-sided Mann-Whitney p < ``alpha``, bootstrap interval above 1."""

    def fails(self, comparison: Comparison) -> str | None:
        # Why both tests: the threshold is a size filter, not a test, and each test can be fooled
        # alone on a noisy machine. Mann-Whitney counts every round as independent evidence, so
        # a slow phase that shifts a block of rounds gives it a tiny p-value; the bootstrap
        # interval of a median is too narrow with few rounds. A false alarm must fool both at
        # once and pass the threshold, while a real slowdown past the threshold passes all three.
        c = comparison
        if c.ratio <= 1.0 + self.threshold or c.p_value >= self.alpha or c.ratio_low <= 1.0:
            return None
        return (
            f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}, "
            f"p={c.p_value:.2g}): {c.describe()}"
        )


class TimeImprovement(_TimeRule):
    """Mirror of ``TimeRegression``: ratio < 1 - threshold, one-sided "faster" p < ``alpha``,
    bootstrap interval below 1."""

    def fails(self, comparison: Comparison) -> str | None:
        c = comparison
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
    """Time threshold per experiment family (fractions) with a global default; also the
    significance level, the memory tolerance and the default same-run-ratio threshold."""

    default: float = DEFAULT_TIME_THRESHOLD
    families: Mapping[str, float] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA
    memory_tolerance: float = DEFAULT_MEMORY_TOLERANCE
    ratio: float = DEFAULT_RATIO_THRESHOLD

    def __post_init__(self) -> None:
        fractions = {"default": self.default, "alpha": self.alpha, "ratio": self.ratio}
        fractions.update({f"families[{k!r}]": v for k, v in self.families.items()})
        for name, value in fractions.items():
            _check_fraction(value, name, upper=0.999 if name == "ratio" else 1.0)
        _check_fraction(self.memory_tolerance, "memory_tolerance")


def threshold_for(
    test_name: str, family: str | None, marker_threshold: float | None, thresholds: Thresholds
) -> float:
    """Time threshold (fraction) of one test: its marker's, else its family's, else the default."""
    if marker_threshold is not None:
        return _check_fraction(marker_threshold, f"threshold marker of {test_name}")
    if family is not None and family in thresholds.families:
        return float(thresholds.families[family])
    return thresholds.default


class Verdict(str, Enum):
    """Outcome for one benchmark, declared from most to least severe."""

    REGRESSION = "regression"  # failed a rule, and the confirmation re-run failed it again
    UNCONFIRMED = "unconfirmed"  # failed in the first pass only (or was not re-run)
    UNTRUSTED = "untrusted"  # run or baseline flagged (throttling, shared GPU): never gated
    MISSING = "missing"  # present on one side only
    IMPROVEMENT = "improvement"  # faster beyond the threshold, significantly
    UNCHANGED = "unchanged"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RatioPair:
    """One same-run ratio of a benchmark (dimensionless), e.g. compiled/eager speedup."""

    name: str
    baseline: float
    current: float
    confirmation: float | None = None  # the same ratio measured in the confirmation re-run
    higher_is_better: bool = True  # False for latency ratios such as MXINT8/FP32
    threshold: float | None = None  # None: Thresholds.ratio


@dataclass(frozen=True)
class BenchmarkPair:
    """One benchmark's data from the baseline and the current run; samples are per-round
    durations in seconds, and None on one side means the benchmark is missing there."""

    name: str
    baseline: Samples | None
    current: Samples | None
    family: str | None = None  # experiment family, e.g. "compile", "sdpa", "mxint8"
    confirmation: Samples | None = None  # the current side re-run, to confirm a regression
    threshold: float | None = None  # the per-test marker value (fraction)
    peak_bytes: tuple[int, int] | None = None  # (baseline, current) peak memory, bytes
    ratios: Sequence[RatioPair] = ()
    untrusted: str | None = None  # why this measurement cannot be trusted, e.g. "GPU throttled"
    # A baseline set's fastest run: an improvement must beat it (``baseline`` is the slowest)
    fastest_baseline: Samples | None = None
    baseline_spread: float | None = None  # slowest / fastest median of the set, minus 1
    # (baseline, current) extra_info of an instruction-count case: gated on its exact counts
    counters: tuple[dict, dict] | None = None


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict on one benchmark; ``comparison`` is the first pass (None if missing)."""

    name: str
    verdict: Verdict
    message: str
    comparison: Comparison | None = None
    confirmation: Comparison | None = None
    family: str | None = None
    threshold: float | None = None
    details: tuple[str, ...] = ()  # lines shown under the row, e.g. a function-level diff


def _failures(
    pair: BenchmarkPair, first: Comparison, threshold: float, thresholds: Thresholds
) -> tuple[list[str], list[str], Comparison | None]:
    """Messages of confirmed and of unconfirmed failures, and the re-run's comparison if made."""
    confirmed: list[str] = []
    unconfirmed: list[str] = []
    second: Comparison | None = None
    time_rule = TimeRegression(threshold, thresholds.alpha)
    if message := time_rule.fails(first):
        if pair.confirmation is not None:
            second = compare_samples(pair.baseline, pair.confirmation)
        if second is not None and time_rule.fails(second):
            confirmed.append(f"{message}; confirmed by re-run: {second.describe()}")
        else:
            unconfirmed.append(message)
    # Peak memory is deterministic, so it needs no re-run to be confirmed.
    memory_rule = MemoryRegression(thresholds.memory_tolerance)
    if pair.peak_bytes is not None and (message := memory_rule.fails(*pair.peak_bytes)):
        confirmed.append(message)
    for ratio in pair.ratios:
        limit = thresholds.ratio if ratio.threshold is None else ratio.threshold
        rule = RatioRegression(limit, ratio.higher_is_better)
        if message := rule.fails(ratio.baseline, ratio.current, ratio.name):
            repeat = ratio.confirmation
            again = repeat is not None and rule.fails(ratio.baseline, repeat, ratio.name)
            (confirmed if again else unconfirmed).append(message)
    return confirmed, [f"{m} (not confirmed by a re-run)" for m in unconfirmed], second


def _gate_one(pair: BenchmarkPair, thresholds: Thresholds, run_untrusted: str | None) -> GateResult:
    result = _verdict(pair, thresholds, run_untrusted)
    if pair.baseline_spread is None or result.verdict is Verdict.MISSING:
        return result
    spread = f" [baseline set spread {pair.baseline_spread:.0%}]"
    return dataclasses.replace(result, message=result.message + spread)


def _verdict(pair: BenchmarkPair, thresholds: Thresholds, run_untrusted: str | None) -> GateResult:
    if pair.baseline is None and pair.current is None:
        raise ValueError(f"{pair.name}: baseline and current are both None")
    if pair.baseline is None or pair.current is None:
        only = "current run (no baseline)" if pair.baseline is None else "baseline (not run)"
        return GateResult(pair.name, Verdict.MISSING, f"only in the {only}", family=pair.family)
    for side in ("baseline", "current", "confirmation"):  # errors name benchmark and side
        if (samples := getattr(pair, side)) is not None:
            as_samples(samples, f"{pair.name} {side}")
    threshold = threshold_for(pair.name, pair.family, pair.threshold, thresholds)
    first = compare_samples(pair.baseline, pair.current)
    row = dict(name=pair.name, comparison=first, family=pair.family, threshold=threshold)
    if reason := pair.untrusted or run_untrusted:
        return GateResult(verdict=Verdict.UNTRUSTED, message=f"not gated: {reason}", **row)
    if pair.counters is not None:
        return _counter_verdict(pair, row)
    confirmed, unconfirmed, second = _failures(pair, first, threshold, thresholds)
    if confirmed or unconfirmed:
        verdict = Verdict.REGRESSION if confirmed else Verdict.UNCONFIRMED
        message = "; ".join(confirmed + unconfirmed)
        return GateResult(verdict=verdict, message=message, confirmation=second, **row)
    best = first
    if pair.fastest_baseline is not None:
        best = compare_samples(pair.fastest_baseline, pair.current)
    if message := TimeImprovement(threshold, thresholds.alpha).fails(best):
        return GateResult(verdict=Verdict.IMPROVEMENT, message=message, **row)
    return GateResult(verdict=Verdict.UNCHANGED, message=first.describe(), **row)


def _counter_verdict(pair: BenchmarkPair, row: dict) -> GateResult:
    """Counts are deterministic: no re-run and no statistics, the rules decide at once."""
    tolerance = DEFAULT_TOLERANCE if pair.threshold is None else pair.threshold
    row = {**row, "threshold": tolerance}
    regressions, improvements = counter_findings(*pair.counters, tolerance)
    if regressions:
        diff = tuple(function_diff(*pair.counters))
        return GateResult(
            verdict=Verdict.REGRESSION, message="; ".join(regressions), details=diff, **row
        )
    if improvements:
        return GateResult(verdict=Verdict.IMPROVEMENT, message="; ".join(improvements), **row)
    before, now = (side["instructions"] for side in pair.counters)
    message = f"instructions per call {now:,} vs baseline {before:,} ({now / before - 1:+.2%})"
    return GateResult(verdict=Verdict.UNCHANGED, message=message, **row)


def gate_results(
    pairs: Iterable[BenchmarkPair],
    thresholds: Thresholds | None = None,
    untrusted: str | None = None,
) -> list[GateResult]:
    """Gate every benchmark; rows sorted by severity (``Verdict`` order), then largest change.

    ``untrusted`` is why the whole run (or its baseline) cannot be trusted, e.g. "GPU
    throttled": every benchmark present on both sides is then reported untrusted, not gated.
    A benchmark is a confirmed regression only when its confirmation re-run fails the same time
    or ratio rule; without confirmation samples a first-pass failure stays "unconfirmed".
    """
    thresholds = Thresholds() if thresholds is None else thresholds
    results = [_gate_one(pair, thresholds, untrusted) for pair in pairs]

    def severity(result: GateResult) -> tuple[int, float, str]:
        change = abs(result.comparison.change_percent) if result.comparison else 0.0
        return list(Verdict).index(result.verdict), -change, result.name

    return sorted(results, key=severity)


def exit_status(results: Iterable[GateResult]) -> int:
    """Process exit code: 1 when any confirmed regression is present, else 0."""
    return int(any(result.verdict is Verdict.REGRESSION for result in results))
