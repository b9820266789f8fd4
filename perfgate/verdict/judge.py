"""The one verdict path: ``judge`` decides, for every benchmark of a current run against a
baseline (one run or a set), whether it is gated and what the gate says. ``--perf-gate`` and
``perfgate compare`` both call it, so for the same two runs they agree benchmark by benchmark.
It pairs each benchmark with its baseline, says why one cannot be gated, and leaves every rule to
``verdict.rules`` (through ``outcome.decide``), as ``perfgate ab`` and ``perfgate bisect`` do.

Every benchmark ends gated (regression, unconfirmed, improvement, unchanged) or not gated with a
reason (new, not run, host-bound, untrusted GPU, too few rounds to decide, a slowdown past the
threshold that is not significant, no per-round data): a slowdown past its threshold is never
"unchanged".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfgate.benchmark import Benchmark, Run
from perfgate.fields import HOST_BOUND_FRACTION, Declared
from perfgate.stats import MIN_ROUNDS, Comparison, compare_samples
from perfgate.verdict.attribution import function_diff, profile_diff
from perfgate.verdict.clocks import clocks_note, gpu_note
from perfgate.verdict.launches import judge_launches
from perfgate.verdict.noise import case_threshold
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.pairing import (
    declarations_of,
    fastest_of,
    same_run_ratios,
    slowest_of,
    worst_ratios,
)
from perfgate.verdict.rules import Case, RatioChange, instructions_tolerance
from perfgate.verdict.thresholds import DEFAULT_INSTRUCTIONS_TOLERANCE, Thresholds
from perfgate.verdict.time_change import TOO_FEW_ROUNDS

# The lab's timing notes: when the host enqueues no faster than the GPU runs, per-call time
# follows host jitter; such a case is reported, never gated on device-time noise.
HOST_BOUND = (
    f"host-bound (host enqueue >= {HOST_BOUND_FRACTION * 100:g} % of device time): its time "
    "follows host jitter"
)


def untrusted_reason(baselines: list[Run], current: Run) -> str | None:
    """Why the GPU of a baseline run or of the current run cannot be trusted (throttling, other
    processes), or None. Every member of a set counts: its numbers may be the reference."""
    reasons = [
        f"baseline{' ' + run.path.name if run.path else ''}: {reason}"
        for run in baselines
        for reason in run.untrusted_reasons
    ]
    reasons += [f"current run: {r}" for r in current.untrusted_reasons]
    return "; ".join(reasons) or None


@dataclass(frozen=True)
class _Context:
    thresholds: Thresholds
    declared: dict[str, dict]
    untrusted: str | None
    baseline_ratios: dict
    current_ratios: dict
    confirmed_ratios: dict
    fastest: dict[str, Benchmark]
    members: dict[str, list[Benchmark]]  # each benchmark in every run of the baseline set


def judge(
    baselines: list[Run],
    current: Run,
    thresholds: Thresholds | None = None,
    confirmation: Run | None = None,
) -> list[GateResult]:
    """The verdict on every benchmark of ``current`` and of the baseline runs (a list of one run
    or of a set, oldest first), worst first. ``confirmation`` holds re-runs of the benchmarks
    that failed a time or ratio rule: only a failure that the re-run repeats is confirmed."""
    thresholds = thresholds or Thresholds()
    declared = declarations_of(current, *reversed(baselines))
    repeat = _merged(current, confirmation)
    context = _Context(
        thresholds=thresholds,
        declared=declared,
        untrusted=untrusted_reason(baselines, current),
        baseline_ratios=worst_ratios(baselines, declared),
        current_ratios=same_run_ratios(current, declared),
        confirmed_ratios=same_run_ratios(repeat, declared) if confirmation else {},
        fastest=fastest_of(baselines) if len(baselines) > 1 else {},
        members=_members(baselines),
    )
    slowest = slowest_of(baselines)
    again = confirmation.benchmarks if confirmation else {}
    results = []
    for name in sorted(set(slowest) | set(current.benchmarks)):
        before, now = slowest.get(name), current.benchmarks.get(name)
        results.append(_judge_one(name, before, now, again.get(name), context))
    return sorted(results, key=_severity)


def _members(baselines: list[Run]) -> dict[str, list[Benchmark]]:
    members: dict[str, list[Benchmark]] = {}
    for run in baselines:
        for name, benchmark in run.benchmarks.items():
            members.setdefault(name, []).append(benchmark)
    return members


def _merged(current: Run, confirmation: Run | None) -> Run:
    if confirmation is None:
        return current
    benchmarks = {**current.benchmarks, **confirmation.benchmarks}
    return Run(None, current.datetime, current.machine_info, current.commit_info, benchmarks)


def _severity(result: GateResult) -> tuple[int, float, str]:
    change = abs(result.comparison.change_percent) if result.comparison else 0.0
    return list(Verdict).index(result.verdict), -change, result.name


def _judge_one(
    name: str, before: Benchmark | None, now: Benchmark | None, again, context: _Context
) -> GateResult:
    result = _verdict_of(name, before, now, again, context)
    if before is None or now is None:
        return result
    if gpus := gpu_note(before, now):
        result = replace(result, details=(*result.details, gpus))
    note = clocks_note(before, now)
    if note is None:
        return result
    return replace(result, clocks=note, details=(*result.details, note))


def _verdict_of(
    name: str, before: Benchmark | None, now: Benchmark | None, again, context: _Context
) -> GateResult:
    declared = context.declared.get(name, {})
    family, marker = declared.get(Declared.FAMILY), declared.get(Declared.THRESHOLD)
    if before is None:
        return GateResult(name, Verdict.NEW, "new benchmark: not in the baseline", family=family)
    if now is None:
        return GateResult(
            name, Verdict.NOT_RUN, "in the baseline, not run this time", family=family
        )
    if before.counted and now.counted:
        return _judge_counts(Case(name, before, now, marker=marker), family)
    case = case_threshold(before, context.members.get(name, []), declared, context.thresholds)
    row = dict(name=name, family=family, threshold=case.value, threshold_source=case.source)
    judged = Case(name, before, now, case.value, context.thresholds, marker)
    reason = _not_gated(before, now, context.untrusted)
    if reason == f"not gated: {HOST_BOUND}" and (counted := judge_launches(judged, row)):
        return counted
    if reason is None and case.too_noisy:
        reason = f"not gated: {case.too_noisy}"
    if reason:
        comparison = _comparison(before, now)
        return GateResult(verdict=Verdict.NOT_GATED, message=reason, comparison=comparison, **row)
    fastest = context.fastest.get(name)
    judged = replace(
        judged,
        first=compare_samples(before.samples, now.samples),
        best=compare_samples(fastest.samples, now.samples) if fastest else None,
        again=compare_samples(before.samples, again.samples) if again else None,
        ratios=_ratio_changes(name, again is not None, context),
    )
    decision = decide(judged)
    details = ()
    if decision.parts:  # attribution: what changed inside the case, from the stored profiles
        baseline_profile = _stored_profile(context.members.get(name, []), before)
        current_profile = now.profile
        details = tuple(
            line
            for part in decision.parts
            for line in profile_diff(baseline_profile, current_profile, part)
        )
    return GateResult(verdict=decision.verdict, message=decision.message,
                      comparison=decision.comparison, details=details, **row)  # fmt: skip


def _ratio_changes(name: str, rerun: bool, context: _Context) -> tuple[RatioChange, ...]:
    """The case's same-run ratios that its baseline has too; ``again`` only when re-run."""
    old = context.baseline_ratios.get(name, {})
    repeat = {r.name: r for r in context.confirmed_ratios.get(name, [])}
    return tuple(
        RatioChange(
            ratio.name,
            old[ratio.name].value,
            ratio.value,
            repeat[ratio.name].value if rerun and ratio.name in repeat else None,
            ratio.higher_is_better,
        )  # fmt: skip
        for ratio in context.current_ratios.get(name, [])
        if ratio.name in old
    )


def _stored_profile(members: list[Benchmark], before: Benchmark) -> dict | None:
    """The baseline's stored profile: the compared run's, else the newest member's that has one."""
    for benchmark in (before, *reversed(members)):
        if benchmark.profile:
            return benchmark.profile
    return None


def _judge_counts(case: Case, family: str | None) -> GateResult:
    """Instruction counts and exact counters are deterministic: no re-run, no statistics."""
    tolerance = instructions_tolerance(case)
    source = f"instructions default {DEFAULT_INSTRUCTIONS_TOLERANCE:.0%}"
    source = source if case.marker is None else "marker"
    row = dict(name=case.name, family=family, threshold=tolerance, threshold_source=source)
    if reason := counted_alike(case.before, case.now):
        return GateResult(verdict=Verdict.NOT_GATED, message=reason, **row)
    decision = decide(case, "instructions")
    details = ()
    if decision.verdict is Verdict.REGRESSION:
        details = tuple(function_diff(case.before, case.now))
    return GateResult(verdict=decision.verdict, message=decision.message, details=details, **row)


def _not_gated(before: Benchmark, now: Benchmark, untrusted: str | None) -> str | None:
    if untrusted:
        return f"not gated: {untrusted}"
    if before.host_bound or now.host_bound:
        return f"not gated: {HOST_BOUND}"
    paths = before.code_path, now.code_path
    if None not in paths and paths[0] != paths[1]:
        return (
            f"not gated: a run-time choice (autotuning, dispatch) ran other code: baseline "
            f"{paths[0]}, now {paths[1]}"
        )
    for side, benchmark in (("baseline", before), ("current run", now)):
        if not benchmark.samples:
            return f"not gated: the {side} has no per-round data (save runs with perfgate)"
        if len(benchmark.samples) < MIN_ROUNDS:
            counts = f"{len(before.samples)} baseline and {len(now.samples)} current rounds"
            return f"not gated: {TOO_FEW_ROUNDS} ({counts}, needs {MIN_ROUNDS} a side)"
    return None


def counted_alike(baseline: Benchmark, current: Benchmark) -> str | None:
    """Why two cases' instruction counts cannot be compared (counted another way), or None."""
    old, new = baseline.uncounted, current.uncounted
    if old == new:
        return None
    return (
        f"not gated: the baseline counted instructions another way (left out: {old or 'nothing'};"
        f" now: {new or 'nothing'}): record a new baseline with --benchmark-save"
    )


def _comparison(before: Benchmark, now: Benchmark) -> Comparison | None:
    if before.samples and now.samples:
        return compare_samples(before.samples, now.samples)
    return None


def rerun_names(results: list[GateResult], current: Run, declared: dict[str, dict]) -> set[str]:
    """Benchmarks to re-run: each unconfirmed one, plus the references its ratios divide by."""
    flagged = {r.name for r in results if r.verdict is Verdict.UNCONFIRMED}
    ratios = same_run_ratios(current, declared)
    partners = {r.partner for name in flagged for r in ratios.get(name, []) if r.partner}
    return flagged | partners


def failed(results: list[GateResult]) -> bool:
    return any(result.verdict is Verdict.REGRESSION for result in results)
