"""A host-bound CUDA case judged on its exact launch counts (``perfgate/measure/launch_counts.py``):
kernel launches, graph launches and graph nodes per call, by the ``LaunchCounts`` rule
(``verdict.rules``). Its time follows host jitter, so the time is shown, never gated; the counts
have no noise, so any increase fails. Its host instructions are counted by the CPU instruction
gate where that gate runs the same code path (``HOST_INSTRUCTIONS``)."""

from __future__ import annotations

from perfgate.stats import compare_samples
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.rules import Case

GATED_ON = "exact launch counts"
# the CPU instruction gate's case that counts the host work of the same code path
HOST_INSTRUCTIONS = {
    "test_resnet18_steady": "test_host_overhead[resnet18-eager-1x3x32x32] (eager) and "
    "[resnet18-compiled-1x3x32x32] (compiled)",
}


def judge_launches(case: Case, row: dict) -> GateResult | None:
    """The verdict on a host-bound case from its launch counts, or None when a side has none."""
    before, now = case.before, case.now
    if not before.launch_counts or not now.launch_counts:
        return None
    comparison = None
    time = "time not compared (no per-round data)"
    if before.samples and now.samples:
        comparison = compare_samples(before.samples, now.samples)
        time = f"wall time {comparison.change_percent:+.1f}% (shown, not gated: host-bound)"
    decision = decide(case, "launches")
    row = {**row, "threshold": 0.0, "threshold_source": GATED_ON, "gated_on": GATED_ON}
    test = row["name"].split("::")[-1].split("[")[0]
    details = ()
    if decision.verdict is Verdict.REGRESSION and test in HOST_INSTRUCTIONS:
        details = (f"host instructions: gated by the CPU gate's {HOST_INSTRUCTIONS[test]}",)
    message = f"host-bound, gated on exact launch counts: {decision.message}; {time}"
    return GateResult(verdict=decision.verdict, message=message, comparison=comparison,
                      details=details, **row)  # fmt: skip
