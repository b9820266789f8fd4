"""The verdict on a counted case (instructions per call under callgrind, exact counters): counts
are deterministic for the same binary, inputs and environment, so no re-run and no statistics;
a count past its tolerance is a regression at once. Cases counted another way (other functions
left out) are not compared. The one judge (``verdict.judge``) asks here."""

from __future__ import annotations

from perfgate.benchmark import Benchmark
from perfgate.verdict.attribution import function_diff
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import Case, instructions_tolerance
from perfgate.verdict.thresholds import DEFAULT_INSTRUCTIONS_TOLERANCE


def judge_counts(case: Case, family: str | None) -> GateResult:
    """Instruction counts and exact counters are deterministic: no re-run, no statistics."""
    tolerance = instructions_tolerance(case)
    source = f"instructions default {DEFAULT_INSTRUCTIONS_TOLERANCE:.0%}"
    source = source if case.marker is None else "marker"
    row = dict(name=case.name, family=family, threshold=tolerance, threshold_source=source)
    if case.before.instructions and case.now.instructions:
        row["instructions"] = (case.before.instructions, case.now.instructions)
    if reason := counted_alike(case.before, case.now):
        return GateResult(
            verdict=Verdict.NOT_GATED, message=reason, reason=Reason.COUNTED_OTHERWISE, **row
        )
    decision = decide(case, "instructions")
    details = ()
    if decision.verdict is Verdict.REGRESSION:
        details = tuple(function_diff(case.before, case.now))
    return GateResult(verdict=decision.verdict, message=decision.message, details=details, **row)


def counted_alike(baseline: Benchmark, current: Benchmark) -> str | None:
    """Why two cases' instruction counts cannot be compared (counted another way), or None."""
    old, new = baseline.uncounted, current.uncounted
    if old == new:
        return None
    return (
        f"not gated: the baseline counted instructions another way (left out: {old or 'nothing'};"
        f" now: {new or 'nothing'}): record a new baseline with --benchmark-save"
    )
