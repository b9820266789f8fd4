"""The one judge: ``judge_case`` answers "is B slower than A?" for one case, whoever asks: the
gate and ``perfgate compare`` (``judge``, every case of a run against a baseline run or set),
``perfgate ab`` and the nightly's A/B (``verdict.paired``: block pairs), and ``perfgate
bisect``'s steps. It applies the preconditions (an untrusted GPU, a host-bound case, other code,
no per-round data, too few rounds), the threshold (``verdict.noise``), the rules (``decide``),
the notes (clocks, GPUs, a machine-wide shift) and the attribution, in one place, so every path
gives the same verdict for the same evidence. Why a case is not gated is a ``Reason``.

Every case ends gated (regression, unconfirmed, improvement, unchanged) or not gated with a
reason: a slowdown past its threshold is never "unchanged", and a significant slowdown past even
the loose threshold a noisy case would need is a regression, never "too noisy".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from perfgate.benchmark import Benchmark, Run
from perfgate.fields import HOST_BOUND_FRACTION, Declared
from perfgate.stats import MIN_PAIRS, MIN_ROUNDS, Comparison, compare_samples, medians_only
from perfgate.verdict import shift as machine
from perfgate.verdict.attribution import function_diff, profile_diff
from perfgate.verdict.clocks import clocks_note, gpu_note
from perfgate.verdict.launches import judge_launches
from perfgate.verdict.noise import case_threshold, too_noisy_message
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.pairing import (
    declarations_of,
    fastest_of,
    same_run_ratios,
    slowest_of,
    worst_ratios,
)
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import Case, RatioChange, instructions_tolerance
from perfgate.verdict.thresholds import DEFAULT_INSTRUCTIONS_TOLERANCE, Thresholds
from perfgate.verdict.time_change import TOO_FEW_ROUNDS

# The lab's timing notes: when the host enqueues no faster than the GPU runs, per-call time
# follows host jitter; such a case is reported, never gated on device-time noise.
HOST_BOUND = (
    f"host-bound (host enqueue >= {HOST_BOUND_FRACTION * 100:g} % of device time): its time "
    "follows host jitter"
)


@dataclass(frozen=True)
class Evidence:
    """What one case's verdict rests on. ``before``/``now``: the baseline's and the current
    measurement (None: not on that side); ``members``: the case in each run of the baseline set,
    or A's blocks (its noise); ``untrusted``: why a side's GPU cannot be trusted. Optional:
    ``fastest`` (the set's fastest run, for improvements), ``again`` (baseline, current) of a
    confirmation, ``ratios`` (same-run ratios), ``paired`` (the block pairs' comparison of an
    A/B: their own confirmation), ``shift`` (the session's machine-wide shift)."""

    name: str
    before: Benchmark | None
    now: Benchmark | None
    declared: dict = field(default_factory=dict)
    members: tuple[Benchmark, ...] = ()
    untrusted: str | None = None
    fastest: Benchmark | None = None
    again: tuple[Benchmark, Benchmark] | None = None
    ratios: tuple[RatioChange, ...] = ()
    paired: Comparison | None = None
    baseline_profile: dict | None = None
    shift: machine.Shift | None = None


def judge_case(evidence: Evidence, thresholds: Thresholds) -> GateResult:
    """The verdict on one case, with the clock and GPU notes of its two sides."""
    result = _verdict_of(evidence, thresholds)
    before, now = evidence.before, evidence.now
    if before is None or now is None:
        return result
    clocks = clocks_note(before, now)
    notes = [note for note in (gpu_note(before, now), clocks) if note]
    return replace(result, clocks=clocks, details=(*result.details, *notes))


def _verdict_of(e: Evidence, thresholds: Thresholds) -> GateResult:
    family, marker = e.declared.get(Declared.FAMILY), e.declared.get(Declared.THRESHOLD)
    before, now = e.before, e.now
    if before is None:
        return GateResult(e.name, Verdict.NEW, "new benchmark: not in the baseline", family=family)
    if now is None:
        return GateResult(
            e.name, Verdict.NOT_RUN, "in the baseline, not run this time", family=family
        )
    if before.counted and now.counted:
        return _judge_counts(Case(e.name, before, now, marker=marker), family)
    case = case_threshold(before, list(e.members), e.declared, thresholds)
    row = dict(name=e.name, family=family, threshold=case.value, threshold_source=case.source)
    judged = Case(e.name, before, now, case.value, thresholds, marker, paired=bool(e.paired))
    if found := _not_gated(e):
        reason, message = found
        if reason is Reason.HOST_BOUND and (counted := judge_launches(judged, row)):
            return counted
        comparison = e.paired or _compared(before, now)
        return GateResult(verdict=Verdict.NOT_GATED, message=f"not gated: {message}",
                          comparison=comparison, reason=reason, **row)  # fmt: skip
    judged = _with_comparisons(judged, e, None)
    decision = decide(judged)
    if case.too_noisy:  # judged at the loose threshold its noise needs: past it, a verdict
        if not (decision.verdict.slower or decision.verdict is Verdict.IMPROVEMENT):
            message = too_noisy_message(case, None if e.paired else now, paired=bool(e.paired))
            return GateResult(verdict=Verdict.NOT_GATED, message=f"not gated: {message}",
                              comparison=decision.comparison, reason=Reason.TOO_NOISY,
                              **row)  # fmt: skip
        loose = f" (past even the {case.value:.1%} that its noise needs)"
        decision = replace(decision, message=decision.message + loose)
    details: tuple[str, ...] = ()
    shift = None
    if e.shift and decision.verdict.slower:
        shift = e.shift.describe()
        against = replace(judged, threshold=e.shift.threshold(case.value))
        if not decide(_with_comparisons(against, e, e.shift)).verdict.slower:
            message = f"{e.shift.within(decision.comparison)}; {decision.message}"
            return GateResult(verdict=Verdict.UNCHANGED, message=message,
                              comparison=decision.comparison, shift=shift, **row)  # fmt: skip
        details = (e.shift.beyond(),)
    if decision.parts:  # attribution: what changed inside the case, from the stored profiles
        profile = e.baseline_profile
        details += tuple(line for part in decision.parts
                         for line in profile_diff(profile, now.profile, part))  # fmt: skip
    return GateResult(verdict=decision.verdict, message=decision.message,
                      comparison=decision.comparison, details=details, reason=decision.reason,
                      shift=shift, **row)  # fmt: skip


def _with_comparisons(case: Case, e: Evidence, shift: machine.Shift | None) -> Case:
    """``case`` with its time comparisons: the A/B's block pairs, or the rounds of both sides
    (the current side divided by a machine-wide ``shift``), the set's fastest run and the
    confirmation; and its same-run ratios."""
    if e.paired:
        return replace(case, first=e.paired, ratios=e.ratios)
    scale = shift.factor if shift else 1.0
    now = [x / scale for x in case.now.samples]
    again = None
    if e.again:
        again = compare_samples(e.again[0].samples, [x / scale for x in e.again[1].samples])
    return replace(
        case,
        first=compare_samples(case.before.samples, now),
        best=compare_samples(e.fastest.samples, now) if e.fastest else None,
        again=again,
        ratios=e.ratios,
    )


def _not_gated(e: Evidence) -> tuple[Reason, str] | None:
    """Why the two sides cannot be compared at all, or None."""
    before, now = e.before, e.now
    if e.untrusted:
        return Reason.UNTRUSTED_GPU, e.untrusted
    if before.host_bound or now.host_bound:
        return Reason.HOST_BOUND, HOST_BOUND
    paths = before.code_path, now.code_path
    if None not in paths and paths[0] != paths[1]:
        return Reason.OTHER_CODE, (
            f"a run-time choice (autotuning, dispatch) ran other code: baseline {paths[0]}, "
            f"now {paths[1]}"
        )
    for side, benchmark in (("baseline", before), ("current run", now)):
        if not benchmark.samples:
            return Reason.NO_DATA, (
                f"the {side} has no per-round data, only pytest-benchmark's statistics (its "
                "median is shown): save runs with perfgate asked (any --perf-* option, or "
                "perfgate = true), which keeps the rounds"
            )
    if e.paired:
        pairs = e.paired.n_baseline
        if pairs < MIN_PAIRS:
            counts = f"{pairs} block pairs, needs {MIN_PAIRS}"
            return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({counts})"
        return None
    if min(len(before.samples), len(now.samples)) < MIN_ROUNDS:
        counts = f"{len(before.samples)} baseline and {len(now.samples)} current rounds"
        return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({counts}, needs {MIN_ROUNDS} a side)"
    return None


def _judge_counts(case: Case, family: str | None) -> GateResult:
    """Instruction counts and exact counters are deterministic: no re-run, no statistics."""
    tolerance = instructions_tolerance(case)
    source = f"instructions default {DEFAULT_INSTRUCTIONS_TOLERANCE:.0%}"
    source = source if case.marker is None else "marker"
    row = dict(name=case.name, family=family, threshold=tolerance, threshold_source=source)
    if reason := counted_alike(case.before, case.now):
        return GateResult(verdict=Verdict.NOT_GATED, message=reason,
                          reason=Reason.COUNTED_OTHERWISE, **row)  # fmt: skip
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


def _compared(before: Benchmark, now: Benchmark) -> Comparison:
    """The rounds compared; without the rounds of a side, its stored median (shown, not
    judged: pytest-benchmark saves no rounds by default)."""
    if before.samples and now.samples:
        return compare_samples(before.samples, now.samples)
    return medians_only(before.median, now.median)


# --- a run against a baseline run or set: the gate and perfgate compare -------------------------
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


def judge(
    baselines: list[Run],
    current: Run,
    thresholds: Thresholds | None = None,
    confirmation: Run | None = None,
) -> list[GateResult]:
    """The verdict on every benchmark of ``current`` and of the baseline runs (a list of one run
    or of a set, oldest first), worst first. ``confirmation`` holds re-runs of the benchmarks
    that failed a time or ratio rule: only a failure that the re-run repeats is confirmed. When
    most cases moved together past their thresholds (the machine changed speed), each case is
    judged against that shift as well (``verdict.shift``)."""
    return judge_all(evidence(baselines, current, confirmation), thresholds or Thresholds())


def judge_all(cases: dict[str, Evidence], thresholds: Thresholds) -> list[GateResult]:
    """The verdict on each case of one session, worst first: each by ``judge_case``, against
    the session's machine-wide shift where most cases moved together (``verdict.shift``)."""
    first = {name: judge_case(replace(e, again=None), thresholds) for name, e in cases.items()}
    found = machine.detect(list(first.values()))
    results = [
        first[name]
        if found is None and e.again is None
        else judge_case(replace(e, shift=found), thresholds)
        for name, e in cases.items()
    ]
    return sorted(results, key=_severity)


def evidence(
    baselines: list[Run], current: Run, confirmation: Run | None = None
) -> dict[str, Evidence]:
    """Each case's evidence: the baseline set's slowest run of it against the current run, the
    set's members and fastest run, the re-run, the same-run ratios and the stored profile."""
    declared = declarations_of(current, *reversed(baselines))
    repeat = _merged(current, confirmation)
    baseline_ratios = worst_ratios(baselines, declared)
    current_ratios = same_run_ratios(current, declared)
    confirmed_ratios = same_run_ratios(repeat, declared) if confirmation else {}
    fastest = fastest_of(baselines) if len(baselines) > 1 else {}
    members = _members(baselines)
    untrusted = untrusted_reason(baselines, current)
    slowest = slowest_of(baselines)
    again = confirmation.benchmarks if confirmation else {}
    found = {}
    for name in sorted(set(slowest) | set(current.benchmarks)):
        before, now = slowest.get(name), current.benchmarks.get(name)
        ratios = _ratio_changes(baseline_ratios.get(name, {}), current_ratios.get(name, []),
                                confirmed_ratios.get(name) if name in again else None)  # fmt: skip
        found[name] = Evidence(
            name, before, now, declared.get(name, {}), tuple(members.get(name, [])), untrusted,
            fastest.get(name), (before, again[name]) if before and name in again else None,
            ratios, baseline_profile=_stored_profile(members.get(name, []), before),
        )  # fmt: skip
    return found


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


def _ratio_changes(old: dict, current: list, repeat: list | None) -> tuple[RatioChange, ...]:
    """The case's same-run ratios that its baseline has too; ``again`` only when re-run."""
    again = {r.name: r.value for r in repeat or []}
    return tuple(
        RatioChange(
            ratio.name,
            old[ratio.name].value,
            ratio.value,
            again.get(ratio.name),
            ratio.higher_is_better,
        )  # fmt: skip
        for ratio in current
        if ratio.name in old
    )


def _stored_profile(members: list[Benchmark], before: Benchmark | None) -> dict | None:
    """The baseline's stored profile: the compared run's, else the newest member's that has one."""
    for benchmark in (before, *reversed(members)):
        if benchmark is not None and benchmark.profile:
            return benchmark.profile
    return None


def rerun_names(results: list[GateResult], current: Run, declared: dict[str, dict]) -> set[str]:
    """Benchmarks to re-run: each unconfirmed one, plus the references its ratios divide by."""
    flagged = {r.name for r in results if r.verdict is Verdict.UNCONFIRMED}
    ratios = same_run_ratios(current, declared)
    partners = {r.partner for name in flagged for r in ratios.get(name, []) if r.partner}
    return flagged | partners


def failed(results: list[GateResult]) -> bool:
    return any(result.verdict is Verdict.REGRESSION for result in results)
