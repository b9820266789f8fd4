"""What one case's verdict rests on (``Evidence``), and the evidence of every case of a run against
a baseline run or set (``evidence``): the set's slowest run of each case, its members (the noise),
its fastest run, the re-run, the same-run ratios and the stored profile. The one judge
(``verdict.judge``) decides from it, whoever gathered it (the gate, compare, ab, bisect)."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfgate.benchmark import Benchmark, Run
from perfgate.stats import Comparison
from perfgate.verdict import shift as machine
from perfgate.verdict.pairing import (
    declarations_of,
    fastest_of,
    same_run_ratios,
    slowest_of,
    worst_ratios,
)
from perfgate.verdict.rules import RatioChange


@dataclass(frozen=True)
class Evidence:
    """What one case's verdict rests on. ``before``/``now``: the baseline's and the current
    measurement (None: not on that side); ``members``: the case in each run of the baseline set,
    or A's blocks (its noise); ``untrusted``: why a side's GPU cannot be trusted. Optional:
    ``fastest`` (the set's fastest run, for improvements), ``again`` (baseline, current) of a
    confirmation, ``ratios`` (same-run ratios), ``paired`` (the block pairs' comparison of an
    A/B: their own confirmation), ``shift`` (the session's machine-wide shift), ``tested`` (how
    many cases are tested together with this one: its p-values are adjusted for them)."""

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
    tested: int = 1

    @property
    def timed(self) -> bool:
        """Both sides hold timed rounds: a case whose time is tested (one of a family)."""
        sides = (self.before, self.now)
        return all(s is not None and s.samples and not s.counted for s in sides)


def untrusted_reason(
    baselines: list[Run], current: list[Run] | Run, paired: bool = False
) -> str | None:
    """Why the GPU of a baseline run or of a current run cannot be trusted (throttling, other
    processes), or None. Every member of a set counts: its numbers may be the reference.

    ``paired``: the blocks of an A/B, both trees taking turns on one GPU. They share its heat and
    power, so a block that began throttled is no reason (each round's clock is kept, and a case
    that ran below its top clock is marked power-limited); another process on the GPU is."""

    def said(run: Run) -> list[str]:
        if not paired:
            return run.untrusted_reasons
        others = run.other_processes
        return [f"other processes on the GPU: {'; '.join(others)}"] if others else []

    currents = current if isinstance(current, list) else [current]
    reasons = [
        f"baseline{' ' + run.path.name if run.path else ''}: {reason}"
        for run in baselines
        for reason in said(run)
    ]
    reasons += [f"{_label(run, 'current run')}: {r}" for run in currents for r in said(run)]
    return "; ".join(dict.fromkeys(reasons)) or None


def _label(run: Run, default: str) -> str:
    return run.path.name if run.path else default


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
        ratios = _ratio_changes(
            baseline_ratios.get(name, {}),
            current_ratios.get(name, []),
            confirmed_ratios.get(name) if name in again else None,
        )
        found[name] = Evidence(
            name,
            before,
            now,
            declared.get(name, {}),
            tuple(members.get(name, [])),
            untrusted,
            fastest.get(name),
            (before, again[name]) if before and name in again else None,
            ratios,
            baseline_profile=_stored_profile(members.get(name, []), before),
        )
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
        )
        for ratio in current
        if ratio.name in old
    )


def _stored_profile(members: list[Benchmark], before: Benchmark | None) -> dict | None:
    """The baseline's stored profile: the compared run's, else the newest member's that has one."""
    for benchmark in (before, *reversed(members)):
        if benchmark is not None and benchmark.profile:
            return benchmark.profile
    return None
