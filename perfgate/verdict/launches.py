"""A host-bound CUDA case judged on its exact launch counts (``perfgate/measure/launch_counts.py``):
kernel launches, graph launches and graph nodes per call, by the ``LaunchCounts`` rule
(``verdict.rules``). Its time follows host jitter, so the time is shown, never gated; the counts
have no noise, so any increase fails. Its host work is what instruction counts see
(``--perf-measure instructions``), where a counted test runs the same code."""

from __future__ import annotations

from perfgate.stats import compare_samples
from perfgate.verdict.outcome import GateResult, decide
from perfgate.verdict.rules import Case

GATED_ON = "exact launch counts"


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
    message = f"host-bound, gated on exact launch counts: {decision.message}; {time}"
    return GateResult(verdict=decision.verdict, message=message, comparison=comparison, **row)
