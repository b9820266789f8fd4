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

from dataclasses import replace

from perfgate.benchmark import Benchmark, Run
from perfgate.fields import HOST_BOUND_FRACTION, Declared
from perfgate.stats import MIN_PAIRS, MIN_ROUNDS, Comparison, compare_samples, medians_only
from perfgate.verdict import shift as machine
from perfgate.verdict.attribution import function_diff, profile_diff
from perfgate.verdict.clocks import clocks_note, gpu_note
from perfgate.verdict.evidence import Evidence, evidence
from perfgate.verdict.launches import judge_launches
from perfgate.verdict.noise import case_threshold, too_noisy_message
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.pairing import same_run_ratios
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import Case, instructions_tolerance
from perfgate.verdict.thresholds import DEFAULT_INSTRUCTIONS_TOLERANCE, Thresholds
from perfgate.verdict.time_change import TOO_FEW_ROUNDS

# The lab's timing notes: when the host enqueues no faster than the GPU runs, per-call time
# follows host jitter; such a case is reported, never gated on device-time noise.
HOST_BOUND = (
    f"host-bound (host enqueue >= {HOST_BOUND_FRACTION * 100:g} % of device time): its time "
    "follows host jitter"
)


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
    case = case_threshold(
        before, list(e.members), e.declared, thresholds, None if e.paired else now
    )
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
            message = too_noisy_message(case, paired=bool(e.paired))
            return GateResult(verdict=Verdict.NOT_GATED, message=f"not gated: {message}",
                              comparison=decision.comparison, reason=Reason.TOO_NOISY,
                              **row)  # fmt: skip
        loose = f" (past even the {case.value:.1%} that its noise needs)"
        decision = replace(decision, message=decision.message + loose)
    details: tuple[str, ...] = ()
    shift = None
    if e.shift and decision.verdict.slower:
        against = replace(judged, threshold=e.shift.threshold(case.value))
        session = decide(_with_comparisons(against, e, e.shift))
        if session.verdict is Verdict.NOT_GATED:  # against the session: neither shown nor not
            shift = e.shift.describe()
            message = f"{session.message} (against this session's movement: {shift})"
            return GateResult(verdict=Verdict.NOT_GATED, message=message, reason=session.reason,
                              comparison=decision.comparison, shift=shift, **row)  # fmt: skip
        sides = (("", decision.comparison), ("on re-run, ", judged.again))  # both must stand out
        held = [side for side in sides if side[1] and not e.shift.stands_out(side[1], case.value)]
        if not session.verdict.slower or held:
            label, seen = held[0] if held else sides[0]
            message = f"{e.shift.within(seen, case.value, label)}; {decision.message}"
            return GateResult(verdict=Verdict.UNCHANGED, message=message, shift=e.shift.describe(),
                              comparison=decision.comparison, **row)  # fmt: skip
        if e.shift.together:
            shift, details = e.shift.describe(), (e.shift.beyond(),)
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
    if case.before.instructions and case.now.instructions:
        row["instructions"] = (case.before.instructions, case.now.instructions)
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
    walls = {
        name
        for name, result in first.items()
        if machine.judged_on_wall_time(
            result, bool(cases[name].before and cases[name].before.device_timed)
        )
    }
    found = machine.detect([first[name] for name in walls])
    results = [
        first[name]
        if (found is None or name not in walls) and e.again is None
        else judge_case(replace(e, shift=found if name in walls else None), thresholds)
        for name, e in cases.items()
    ]
    return sorted(results, key=_severity)


def _on_wall_time(e: Evidence, result: GateResult) -> bool:
    device_timed = e.before is not None and e.before.device_timed
    return machine.judged_on_wall_time(result, device_timed)


def _severity(result: GateResult) -> tuple[int, float, str]:
    change = abs(result.comparison.change_percent) if result.comparison else 0.0
    return list(Verdict).index(result.verdict), -change, result.name


def rerun_names(results: list[GateResult], current: Run, declared: dict[str, dict]) -> set[str]:
    """Benchmarks to re-run: each unconfirmed one, plus the references its ratios divide by."""
    flagged = {r.name for r in results if r.verdict is Verdict.UNCONFIRMED}
    ratios = same_run_ratios(current, declared)
    partners = {r.partner for name in flagged for r in ratios.get(name, []) if r.partner}
    return flagged | partners


def failed(results: list[GateResult]) -> bool:
    return any(result.verdict is Verdict.REGRESSION for result in results)
