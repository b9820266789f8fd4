"""The rules, one interface: ``rule.check(case)`` returns the rule's findings on one benchmark
(none when it has nothing to say). A finding is worse (a regression) or better (an improvement),
confirmed or not. Every rule is listed once, in ``RULES``, by what a case measured; the gate's
judge, ``perfgate compare``, ``perfgate ab`` and ``perfgate bisect`` all ask ``findings``.

Adding a rule: a class with ``name`` and ``check(case)`` here, listed in ``RULES``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from numbers import Integral, Real

from perfgate.benchmark import Benchmark
from perfgate.fields import Field
from perfgate.stats import Comparison
from perfgate.verdict.pairing import peak_bytes
from perfgate.verdict.thresholds import (
    DEFAULT_INSTRUCTIONS_TOLERANCE,
    DEFAULT_TIME_THRESHOLD,
    Thresholds,
    check_fraction,
)
from perfgate.verdict.time_change import TimeImprovement, TimeRegression


@dataclass(frozen=True)
class RatioChange:
    """One same-run ratio of a case: its baseline value, now, and on the re-run (None: not
    re-run)."""

    name: str
    baseline: float
    current: float
    again: float | None = None
    higher_is_better: bool = True


@dataclass(frozen=True)
class Case:
    """One benchmark as the rules see it. ``first`` compares its time now with the baseline;
    ``best`` with the baseline set's fastest run (improvements; None: ``first``); ``again`` is
    the re-run's comparison (None: not re-run); ``paired`` comparisons (A/B blocks) are their own
    confirmation. ``marker`` is the test's threshold marker: it also covers ratios and counts."""

    name: str
    before: Benchmark
    now: Benchmark
    threshold: float = DEFAULT_TIME_THRESHOLD
    thresholds: Thresholds = field(default_factory=Thresholds)
    marker: float | None = None
    first: Comparison | None = None
    best: Comparison | None = None
    again: Comparison | None = None
    paired: bool = False
    ratios: tuple[RatioChange, ...] = ()
    sessions: int = 1  # runs of the baseline (a set's), each saved in a session of its own


# What a re-run in the same session cannot tell, said where it is the only confirmation.
ONE_SESSION = (
    "a re-run in this session only: against a baseline saved in one session, an offset of "
    "that session reads the same; a baseline set saved in sessions of their own, or "
    "`perfgate check` (an A/B against the baseline's commit), confirms across sessions"
)


@dataclass(frozen=True)
class Finding:
    """What one rule says about one case. ``part`` names what explains it (the stored profile's
    "time" or "memory" rows, the "instructions" per function)."""

    rule: str
    message: str
    worse: bool  # True: a regression; False: an improvement
    confirmed: bool = True  # False: failed once, not repeated by a re-run
    part: str = "time"


class SlowerTime:
    """Slower past the case's threshold (``TimeRegression``); confirmed when the re-run is too."""

    name = "time"

    def check(self, case: Case) -> list[Finding]:
        rule = TimeRegression(case.threshold, case.thresholds.alpha)
        if case.first is None or not (message := rule.fails(case.first)):
            return []
        if case.paired:
            return [Finding(self.name, message, worse=True)]
        if case.again is not None and rule.fails(case.again):
            message += f"; confirmed by re-run: {case.again.describe()}"
            if case.sessions <= 1:
                message += f" ({ONE_SESSION})"
            return [Finding(self.name, message, worse=True)]
        return [Finding(self.name, message, worse=True, confirmed=False)]


class FasterTime:
    """Faster past the case's threshold (``TimeImprovement``), against the set's fastest run."""

    name = "time improvement"

    def check(self, case: Case) -> list[Finding]:
        shown = case.best or case.first
        rule = TimeImprovement(case.threshold, case.thresholds.alpha)
        if shown is None or not (message := rule.fails(shown)):
            return []
        if case.best is not None:
            message += " (against the baseline set's fastest run)"
        return [Finding(self.name, message, worse=False)]


class PeakMemory:
    """Peak memory (bytes) grew past the memory tolerance. No statistics and no re-run: a peak
    is deterministic for a given program and allocator, so any growth past it is real."""

    name = "memory"

    def check(self, case: Case) -> list[Finding]:
        peak = peak_bytes(case.before, case.now)
        if peak is None:
            return []
        before, now = peak
        for name, value in (("baseline", before), ("current", now)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                raise ValueError(f"{name} peak must be a non-negative int (bytes), got {value!r}")
        if now <= before * (1.0 + case.thresholds.memory_tolerance):
            return []
        growth = f"+{now / before - 1:.1%}" if before else "was 0"
        message = f"peak memory {now:,} B vs baseline {before:,} B ({growth})"
        return [Finding(self.name, message, worse=True, part="memory")]


class RatioLoss:
    """A same-run ratio lost more than its threshold (the test's marker, else the ratio
    threshold) of its baseline value: with ``higher_is_better`` (speedups, fractions of roofline)
    current/baseline < 1 - threshold, else (latency ratios) baseline/current < 1 - threshold.
    Each ratio is measured within one run, so drift cancels: a collapse counts even if both
    times moved. Confirmed when the re-run's ratio fails too."""

    name = "ratio"

    def check(self, case: Case) -> list[Finding]:
        if not case.ratios:
            return []
        limit = case.thresholds.ratio if case.marker is None else case.marker
        limit = check_fraction(limit, f"ratio threshold of {case.name}", upper=0.999)
        found = []
        for ratio in case.ratios:
            if message := _ratio_lost(ratio, ratio.current, limit):
                repeated = ratio.again is not None and _ratio_lost(ratio, ratio.again, limit)
                found.append(Finding(self.name, message, worse=True, confirmed=bool(repeated)))
        return found


def _ratio_lost(ratio: RatioChange, current: float, limit: float) -> str | None:
    for side, value in (("baseline", ratio.baseline), ("current", current)):
        if not (isinstance(value, Real) and math.isfinite(value) and value > 0):
            raise ValueError(f"{ratio.name} {side} must be a finite positive number, got {value!r}")
    kept = current / ratio.baseline if ratio.higher_is_better else ratio.baseline / current
    if kept >= 1.0 - limit:
        return None
    better = "higher" if ratio.higher_is_better else "lower"
    change = f"{current / ratio.baseline - 1:+.1%}, {better} is better"
    return f"{ratio.name} {current:.4g} vs baseline {ratio.baseline:.4g} ({change})"


def instructions_tolerance(case: Case) -> float:
    """Instructions per call may change by this fraction: the test's marker, else 1 %."""
    if case.marker is None:
        return DEFAULT_INSTRUCTIONS_TOLERANCE
    return check_fraction(case.marker, f"instructions tolerance of {case.name}", upper=0.999)


def instructions(benchmark: Benchmark, side: str) -> int:
    """A counted case's median instructions per call; ValueError when it is not positive."""
    value = benchmark.fact(Field.INSTRUCTIONS)
    if isinstance(value, bool) or not isinstance(value, Real) or value <= 0:
        raise ValueError(f"{side} instructions must be a positive number, got {value!r}")
    return value


class InstructionCount:
    """Instructions per call (callgrind) more than the tolerance above the baseline: a
    regression; more than it below: an improvement. Counts are deterministic: no re-run."""

    name = "instructions"

    def check(self, case: Case) -> list[Finding]:
        tolerance = instructions_tolerance(case)
        before = instructions(case.before, "baseline")
        now = instructions(case.now, "current")
        change = now / before - 1
        described = f"instructions per call {now:,} vs baseline {before:,} ({change:+.2%}"
        if change > tolerance:
            message = f"{described}, tolerance {tolerance:.2%})"
            return [Finding(self.name, message, worse=True, part="instructions")]
        if change < -tolerance:
            return [Finding(self.name, f"{described})", worse=False, part="instructions")]
        return []


def _exact(rule: str, old: dict | None, new: dict | None, part: str) -> list[Finding]:
    """Exact counters present on both sides: no tolerance, any increase is a regression, any
    decrease an improvement."""
    old, new = old or {}, new or {}
    found = []
    for name in sorted(set(old) & set(new)):
        described = f"{name} {new[name]} vs baseline {old[name]} (exact"
        if new[name] != old[name]:
            worse = new[name] > old[name]
            message = f"{described}: any increase fails)" if worse else f"{described})"
            found.append(Finding(rule, message, worse=worse, part=part))
    return found


class ExactCounters:
    """The exact counters a counted case stores (``Benchmark.counters``: ATen operators,
    allocations, ... per call)."""

    name = "exact counters"

    def check(self, case: Case) -> list[Finding]:
        old, new = case.before.counters, case.now.counters
        return _exact(self.name, old, new, "instructions")


class LaunchCounts:
    """A host-bound CUDA case's exact launch counts (kernel launches, graph launches and graph
    nodes per call, ``measure.launch_counts``)."""

    name = "launch counts"

    def check(self, case: Case) -> list[Finding]:
        old, new = case.before.launch_counts, case.now.launch_counts
        return _exact(self.name, old, new, "")


# Every rule, by what a case measured: "time" (timed rounds), "instructions" (callgrind counts),
# "launches" (a host-bound case's launch counts). Nothing judges outside this list.
RULES = {
    "time": (SlowerTime(), PeakMemory(), RatioLoss(), FasterTime()),
    "instructions": (InstructionCount(), ExactCounters()),
    "launches": (LaunchCounts(),),
}


def all_rules() -> Iterator:
    for rules in RULES.values():
        yield from rules


def findings(measured: str, case: Case) -> list[Finding]:
    """Every finding of the rules for what ``case`` measured, in the order of ``RULES``."""
    return [finding for rule in RULES[measured] for finding in rule.check(case)]
