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
from perfgate.stats import (
    MIN_PAIRS,
    MIN_ROUNDS,
    Comparison,
    compare_samples,
    medians_only,
)
from perfgate.verdict import shift as machine
from perfgate.verdict.attribution import profile_diff
from perfgate.verdict.clocks import clocks_note, gpu_note
from perfgate.verdict.counts import judge_counts
from perfgate.verdict.evidence import Evidence, evidence
from perfgate.verdict.family import tested_together, together
from perfgate.verdict.launches import judge_launches
from perfgate.verdict.noise import case_threshold, too_noisy_message
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.pairing import same_run_ratios
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import Case
from perfgate.verdict.thresholds import Thresholds
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
    """The steps, in order: a side missing; counted cases (exact); the threshold; what stops a
    comparison (preconditions); the rules on time; a noisy case's loose threshold; the
    session's machine-wide shift; the attribution of a confirmed failure."""
    family = e.declared.get(Declared.FAMILY)
    if (missing := _one_side(e, family)) is not None:
        return missing
    before, now = e.before, e.now
    if before.counted and now.counted:
        marker = e.declared.get(Declared.THRESHOLD)
        return judge_counts(Case(e.name, before, now, marker=marker), family)
    case = case_threshold(
        before, list(e.members), e.declared, thresholds, None if e.paired else now
    )
    row = dict(name=e.name, family=family, threshold=case.value, threshold_source=case.source)
    judged = Case(e.name, before, now, case.value, thresholds,
                  e.declared.get(Declared.THRESHOLD), paired=bool(e.paired),
                  sessions=len(e.members) or 1)  # fmt: skip
    if (stopped := _not_compared(e, judged, row)) is not None:
        return stopped
    judged = _with_comparisons(judged, e, None)
    decision = decide(judged)
    if case.too_noisy:
        if (noisy := _too_noisy(e, case, decision, row)) is not None:
            return noisy
        loose = f" (past even the {case.value:.1%} that its noise needs)"
        decision = replace(decision, message=decision.message + loose)
    shift, details = None, ()
    if e.shift and decision.verdict.slower:
        if (against := _against_the_session(e, judged, case.value, decision, row)) is not None:
            return against
        if e.shift.together:
            shift, details = e.shift.describe(), (e.shift.beyond(),)
    return GateResult(verdict=decision.verdict, message=decision.message,
                      comparison=decision.comparison, details=details + _attributed(e, decision),
                      reason=decision.reason, shift=shift, **row)  # fmt: skip


def unmeasured(name: str, words: str, reason: Reason = Reason.TOO_FEW_ROUNDS) -> GateResult:
    """A case to be compared that has nothing to compare yet (no block pair, an A/B stopped
    before it): undecided, with why."""
    return GateResult(name, Verdict.UNDECIDED, f"undecided: {words}", reason=reason)


def _one_side(e: Evidence, family: str | None) -> GateResult | None:
    """A case on one side only: new, or not run this time."""
    if e.before is None:
        return GateResult(e.name, Verdict.NEW, "new benchmark: not in the baseline", family=family)
    if e.now is None:
        return GateResult(
            e.name, Verdict.NOT_RUN, "in the baseline, not run this time", family=family
        )
    return None


def _not_compared(e: Evidence, judged: Case, row: dict) -> GateResult | None:
    """A case whose sides cannot be compared (not gated) or are too few to decide (undecided),
    or None. A host-bound case is gated on its launch counts where it has them."""
    found = _not_gated(e)
    if found is None:
        return None
    reason, message = found
    if reason is Reason.HOST_BOUND and (counted := judge_launches(judged, row)):
        return counted
    comparison = e.paired or _compared(e.before, e.now)
    if reason is Reason.TOO_FEW_ROUNDS:
        return GateResult(verdict=Verdict.UNDECIDED, message=f"undecided: {message}",
                          comparison=comparison, reason=reason, **row)  # fmt: skip
    return GateResult(verdict=Verdict.NOT_GATED, message=f"not gated: {message}",
                      comparison=comparison, reason=reason, **row)  # fmt: skip


def _too_noisy(e: Evidence, case, decision, row: dict) -> GateResult | None:
    """A case too noisy to gate is judged at the loose threshold its noise needs: past it, a
    verdict (None here); within it, not gated, saying which side was noisy."""
    if decision.verdict.slower or decision.verdict is Verdict.IMPROVEMENT:
        return None
    message = too_noisy_message(case, paired=bool(e.paired))
    return GateResult(verdict=Verdict.NOT_GATED, message=f"not gated: {message}",
                      comparison=decision.comparison, reason=Reason.TOO_NOISY,
                      **row)  # fmt: skip


def _against_the_session(e: Evidence, judged: Case, own: float, decision, row: dict):
    """A slower case judged against the session's machine-wide shift too: where it does not
    stand out from how the session's cases moved (on its first run and its re-run), unchanged
    if the session's bar is the case's own threshold, else undecided (a session that moved so
    much cannot rule out a change of the case's size); None where it stands out (the verdict
    stands)."""
    against = replace(judged, threshold=e.shift.threshold(own))
    session = decide(_with_comparisons(against, e, e.shift))
    if session.verdict is Verdict.UNDECIDED and session.reason is not Reason.WIDE_INTERVAL:
        shift = e.shift.describe()  # against the session: a slowdown neither shown nor not
        message = f"{session.message} (against this session's movement: {shift})"
        return GateResult(verdict=Verdict.UNDECIDED, message=message, reason=session.reason,
                          comparison=decision.comparison, shift=shift, **row)  # fmt: skip
    sides = (("", decision.comparison), ("on re-run, ", judged.again))  # both must stand out
    held = [side for side in sides if side[1] and not e.shift.stands_out(side[1], own)]
    if session.verdict.slower and not held:
        return None
    label, seen = held[0] if held else sides[0]
    if e.shift.threshold(own) > own:  # the session's spread, not the case's threshold, is the bar
        message = f"undecided: {e.shift.cannot_tell(seen, own, label)}; {decision.message}"
        return GateResult(verdict=Verdict.UNDECIDED, message=message, reason=Reason.MACHINE_MOVED,
                          shift=e.shift.describe(), comparison=decision.comparison,
                          **row)  # fmt: skip
    message = f"{e.shift.within(seen, own, label)}; {decision.message}"
    return GateResult(verdict=Verdict.UNCHANGED, message=message, shift=e.shift.describe(),
                      comparison=decision.comparison, **row)  # fmt: skip


def _attributed(e: Evidence, decision) -> tuple[str, ...]:
    """What changed inside a confirmed failure, from the stored profiles."""
    if not decision.parts:
        return ()
    profile = e.baseline_profile
    return tuple(line for part in decision.parts
                 for line in profile_diff(profile, e.now.profile, part))  # fmt: skip


def _with_comparisons(case: Case, e: Evidence, shift: machine.Shift | None) -> Case:
    """``case`` with its time comparisons: the A/B's block pairs, or the rounds of both sides
    (the current side divided by a machine-wide ``shift``), the set's fastest run and the
    confirmation; and its same-run ratios. The p-values of the first comparisons are adjusted
    for the cases tested with it (``Evidence.tested``); a re-run confirms an already flagged
    case, and is not."""
    if e.paired:
        return replace(case, first=tested_together(e.paired, e.tested), ratios=e.ratios)
    scale = shift.factor if shift else 1.0
    now = [x / scale for x in case.now.samples]
    again = None
    if e.again:
        again = compare_samples(e.again[0].samples, [x / scale for x in e.again[1].samples])
    best = compare_samples(e.fastest.samples, now) if e.fastest else None
    return replace(
        case,
        first=tested_together(compare_samples(case.before.samples, now), e.tested),
        best=tested_together(best, e.tested) if best else None,
        again=again,
        ratios=e.ratios,
    )


def _not_gated(e: Evidence) -> tuple[Reason, str] | None:
    """Why the two sides cannot be compared at all, or are too few to (``TOO_FEW_ROUNDS``), or
    None."""
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
            counts = f"{pairs} block pairs, needs {MIN_PAIRS} for a t-test"
            return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({counts})"
        return None
    if min(len(before.samples), len(now.samples)) < MIN_ROUNDS:
        counts = f"{len(before.samples)} baseline and {len(now.samples)} current rounds"
        return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({counts}, needs {MIN_ROUNDS} a side)"
    return None


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
    the session's machine-wide shift where most cases moved together (``verdict.shift``). The
    session's timed cases are tested together: each one's p-values are adjusted for their number
    (``verdict.family``), so testing more cases never means more false alarms."""
    cases = together(cases)
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
