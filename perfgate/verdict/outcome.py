"""What the verdict says about one benchmark: ``Verdict``, ``GateResult``, and ``decide``, which
turns the rules' findings on one case into a verdict and its words. The gate, ``perfgate
compare``, ``perfgate ab`` and ``perfgate bisect`` all decide and speak through these."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from perfgate.stats import Comparison
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import Case, findings
from perfgate.verdict.time_change import NoChange, TimeRegression


class Verdict(str, Enum):
    """Outcome for one benchmark, declared from most to least severe."""

    REGRESSION = "regression"  # failed a rule, and (for time and ratios) again on re-run
    UNCONFIRMED = "unconfirmed"  # failed a time or ratio rule once; not (yet) re-run
    UNDECIDED = "undecided"  # compared, but the data neither show a change nor rule one out
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

    @property
    def decided(self) -> bool:
        """A gated verdict or an undecided one: the two sides were compared on their data."""
        return self.gated or self is Verdict.UNDECIDED

    @property
    def slower(self) -> bool:
        """A regression, confirmed or not."""
        return self in (Verdict.REGRESSION, Verdict.UNCONFIRMED)


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
    reason: Reason | None = None  # why a case is not gated (None for every other verdict)
    shift: str | None = None  # the session's machine-wide shift, where it was judged against one
    instructions: tuple[float, float] | None = None  # a counted case's, per call: baseline, now


@dataclass(frozen=True)
class Decision:
    """The verdict the rules' findings give one case: its words, the comparison its numbers come
    from, and the parts ("time", "memory", "instructions") that explain a confirmed failure."""

    verdict: Verdict
    message: str
    comparison: Comparison | None = None
    parts: tuple[str, ...] = ()
    reason: Reason | None = None


def decide(case: Case, measured: str = "time") -> Decision:
    """The verdict on ``case`` from ``findings`` of the rules for what it ``measured``: a
    regression when a worse finding is confirmed, unconfirmed when none is; an improvement on a
    better finding; unchanged only where the data rule out a change of the threshold's size
    (``NoChange``: for time, its interval inside +-threshold); else undecided, with the reason
    and what more would decide it. A slowdown past the threshold is never unchanged."""
    found = findings(measured, case)
    worse = [f for f in found if f.worse]
    if worse:
        confirmed = [f for f in worse if f.confirmed]
        messages = [f.message for f in confirmed]
        messages += [f"{f.message} (not confirmed by a re-run)" for f in worse if not f.confirmed]
        verdict = Verdict.REGRESSION if confirmed else Verdict.UNCONFIRMED
        parts = tuple(dict.fromkeys(f.part for f in confirmed if f.part))
        return Decision(verdict, "; ".join(messages), case.first, parts)
    timed = measured == "time" and case.first is not None
    rule = TimeRegression(case.threshold, case.thresholds.alpha) if timed else None
    if rule and (reason := rule.undecided(case.first)):
        return _undecided(case, reason)
    if better := [f.message for f in found if not f.worse]:
        return Decision(Verdict.IMPROVEMENT, "; ".join(better), case.best or case.first)
    same = NoChange(case.threshold, case.thresholds.alpha) if timed else None
    if same and not same.shown(case.first, case.best):
        return _undecided(case, same.not_shown(case.first, case.best))
    return Decision(Verdict.UNCHANGED, unchanged_message(case, measured), case.first)


def _undecided(case: Case, reason: tuple[Reason, str]) -> Decision:
    why, words = reason
    return Decision(Verdict.UNDECIDED, f"undecided: {words}", case.first, reason=why)


def unchanged_message(case: Case, measured: str) -> str:
    """What an unchanged case shows: its time comparison, its instructions, or its counts."""
    if measured == "instructions":
        old, new = case.before.instructions, case.now.instructions
        return f"instructions per call {new:,} vs baseline {old:,} ({new / old - 1:+.2%})"
    if measured == "launches":
        old, new = case.before.launch_counts, case.now.launch_counts
        counts = ", ".join(f"{name} {new[name]}" for name in sorted(set(old) & set(new)))
        return f"per call {counts} (exact, unchanged)"
    first, threshold = case.first, case.threshold
    message = first.describe()
    same = NoChange(threshold, case.thresholds.alpha)
    if not same.testable(first):  # rounds only: pairs are never decided without a test
        message += f"; {same.untested(first)}: every current round is within {threshold:.0%} "
        return message + "of every baseline round"
    if case.best is not None and case.best is not first:
        best = case.best
        return message + (
            f", inside +-{threshold:.0%} of the set's runs (against its fastest run "
            f"[{best.ratio_low:.3f}, {best.ratio_high:.3f}])"
        )
    return message + f", inside +-{threshold:.0%}"
