"""What the verdict says about one benchmark: ``Verdict``, ``GateResult``, and the words of the
time rules once no rule failed (not gated when undecided, improvement, unchanged). The gate,
``perfgate compare``, ``perfgate ab`` and ``perfgate bisect`` all speak through these."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from perfgate.stats import Comparison
from perfgate.verdict.rules import TimeImprovement, TimeRegression


class Verdict(str, Enum):
    """Outcome for one benchmark, declared from most to least severe."""

    REGRESSION = "regression"  # failed a rule, and (for time and ratios) again on re-run
    UNCONFIRMED = "unconfirmed"  # failed a time or ratio rule once; not (yet) re-run
    NOT_GATED = "not gated"  # measured on both sides but cannot be judged; ``message`` says why
    NEW = "new"  # a new benchmark: not in the baseline
    NOT_RUN = "not run"  # in the baseline, not run this time (deselected or skipped)
    IMPROVEMENT = "improvement"  # faster beyond the threshold, significantly
    UNCHANGED = "unchanged"

    def __str__(self) -> str:
        return self.value

    @property
    def gated(self) -> bool:
        gated = (Verdict.REGRESSION, Verdict.UNCONFIRMED, Verdict.IMPROVEMENT, Verdict.UNCHANGED)
        return self in gated


@dataclass(frozen=True)
class GateResult:
    """The verdict on one benchmark. ``comparison`` is what the message's numbers come from
    (for an improvement: against the set's fastest run); None when one side is missing."""

    name: str
    verdict: Verdict
    message: str
    comparison: Comparison | None = None
    family: str | None = None
    threshold: float | None = None
    threshold_source: str | None = None  # "marker", "given for sdpa", "floor 3 % (...)", ...
    details: tuple[str, ...] = ()  # lines shown under the row, e.g. a function-level diff
    clocks: str | None = None  # "power-limited: ...": explains a change, never stops the gate
    gated_on: str | None = None  # what decided a gated case other than time ("exact launch counts")


def time_outcome(
    first: Comparison, best: Comparison, threshold: float, alpha: float
) -> tuple[Verdict, str, Comparison]:
    """(verdict, message, the comparison shown) for a case that failed no rule: not gated when
    the rounds cannot tell (``TimeRegression.undecided``), an improvement on ``best`` (against
    a set's fastest run), else unchanged. A slowdown past the threshold is never unchanged."""
    slower = TimeRegression(threshold, alpha)
    if reason := slower.undecided(first):
        return Verdict.NOT_GATED, f"not gated: {reason}", first
    if message := TimeImprovement(threshold, alpha).fails(best):
        return Verdict.IMPROVEMENT, message, best
    message = first.describe()
    if not slower.testable(first):
        which = "block than its pair" if first.paired else "round than any baseline round"
        message += f"; {slower.untested(first)}: no current {which} is slower by more than "
        message += f"{threshold:.0%}"
    return Verdict.UNCHANGED, message, first
