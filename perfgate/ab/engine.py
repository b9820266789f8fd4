"""The schedule of an A/B: the cases' block pairs spread over lanes (one per GPU, or the one lane
of a CPU run) by their measured cost (``plan``), each lane running its cases' pairs in
counterbalanced order (``order``), the lanes at the same time, one thread each; a lane's cases
that their first pairs leave undecided (slower past the threshold, not yet significantly) run
``more`` pairs alone. Every completed block goes to the journal first; a resumed A/B runs only
the pairs a case has not completed, on the lanes a new plan gives it (a case may move: its A
and B blocks of one pair always share a lane, and a pair half done when the A/B stopped runs
again whole). Progress after each block: elapsed, an estimate of what remains, and how many of
all the cases are decided.

With a deadline, a lane starts a pair only when its pace says the pair ends in time; what it did
not start is left undecided (``Outcome.remaining``). An interrupt kills the block processes and
leaves the journal as it was after the last completed block.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from perfgate.ab.journal import Block, Entry, Journal
from perfgate.ab.order import A, B, b_first, block_seconds, lanes_of, pair_order
from perfgate.benchmark import Run
from perfgate.progress import Progress, duration
from perfgate.verdict.nightly import AB_DECIDED
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.time_change import within_reach


class Pair(NamedTuple):
    """One block pair: A's and B's results, and whether B ran first."""

    a: Run
    b: Run
    b_first: bool


Judge = Callable[[list[Pair]], list[GateResult]]


class Runner(Protocol):
    """Runs blocks on GPU lanes: the block processes (``compare.Processes``), or a fake in the
    tests. ``gpu``: the index of the lane's GPU (of the A/B's GPUs)."""

    def run(self, block: Block, gpu: int, report: Path, log: Path) -> Run: ...
    def pids(self) -> set[int]: ...
    def stop(self) -> None: ...


@dataclass
class Plan:
    """Which cases each GPU runs, and what is left of them: ``lanes[i]`` (the cases of GPU i) is
    the journal's lane ``first + i`` (a resumed A/B numbers its lanes after the kept ones);
    ``todo``: each case's first pairs still to run; ``seconds``: each lane's estimate (None where
    no case's cost is known)."""

    lanes: list[list[str]]
    todo: dict[str, list[int]]
    seconds: list[float | None]
    first: int = 0

    def blocks(self) -> int:
        """The blocks of the first pairs still to run."""
        return sum(2 * len({p for name in cases for p in self.todo[name]}) for cases in self.lanes)

    def lines(self, gpus: list[str | None]) -> list[str]:
        """The plan for people: each lane's GPU, cases and estimated seconds."""
        found = []
        for i, cases in enumerate(self.lanes):
            if not cases:
                continue
            where = f" on GPU {gpus[i]}" if i < len(gpus) and gpus[i] is not None else ""
            pairs = sum(len(self.todo[name]) for name in cases)
            about = f", about {duration(self.seconds[i])}" if self.seconds[i] is not None else ""
            found.append(f"lane {i + 1}{where}: {len(cases)} cases, {pairs} of their block "
                         f"pairs to run{about}")  # fmt: skip
        return found


def complete_pairs(journal: Journal, name: str) -> dict[int, int]:
    """The pairs ``name`` completed (both blocks on one lane): pair -> lane."""
    found = {}
    for (lane, pair, label), entry in journal.entries.items():
        if label == A and name in entry.block.cases:
            other = journal.done(lane, pair, B)
            if other is not None and name in other.block.cases:
                found.setdefault(pair, lane)
    return found


def plan(cases: list[str], pairs: int, more: int, count: int, journal: Journal,
         stored: dict[str, float] | None = None,
         groups: dict[str, str] | None = None) -> Plan:  # fmt: skip
    """``cases`` over ``count`` lanes by what is left of them (each case's first ``pairs``
    pairs not completed in ``journal``, and the rest of its ``more`` pairs where it began
    them), at the seconds a block of it takes (``order.block_seconds``: the journal's blocks,
    else ``stored``), longest first onto the least loaded lane (groups, ``groups``: name ->
    group, on one lane)."""
    done = {name: complete_pairs(journal, name) for name in cases}
    todo = {name: [p for p in range(pairs) if p not in done[name]] for name in cases}
    began = {n: sum(p >= pairs for p in done[n]) for n in cases}
    ran = [(e.block.cases, e.seconds) for e in journal.entries.values()]
    cost = block_seconds(cases, stored or {}, ran)
    known = [cost[n] for n in cases if n in cost]
    each = {n: cost.get(n, sum(known) / len(known) if known else 1.0) for n in cases}
    left = {n: len(todo[n]) + (more - began[n] if began[n] else 0) for n in cases}
    work = {n: 2 * left[n] * each[n] for n in cases}
    lanes = lanes_of(list(cases), count, work, groups)
    seconds = [sum(work[n] for n in lane) if known else None for lane in lanes]
    first = max((lane for lane, _, _ in journal.entries), default=-1) + 1
    return Plan(lanes, todo, seconds, first)


Evidence = tuple[list[str], list[Pair]]  # cases, and the block pairs that ran them all


@dataclass
class Outcome:
    """What the A/B did: groups of cases judged on the same block pairs, and the cases a
    deadline or an interrupt left unstarted (by lane)."""

    groups: list[Evidence]
    remaining: list[list[str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not any(self.remaining)


class _Deadline(Exception):
    """A lane cannot end its next pair before the deadline."""


class _Stopped(Exception):
    """Another lane failed, or the A/B was interrupted: start no more blocks."""


def undecided(results: list[GateResult], more: int) -> list[str]:
    """Cases compared but not decided (a slowdown past the threshold that is not significant
    yet, an interval wider than the threshold) that ``more`` block pairs may decide: a case
    whose blocks scatter far past its threshold is left undecided, not run for nothing."""
    return [r.name for r in results if r.verdict is Verdict.UNDECIDED and r.comparison
            and within_reach(r.comparison, r.threshold, more)]  # fmt: skip


class Engine:
    """The block pairs of ``plan``, ``pairs`` each, ``more`` more for the undecided; blocks by
    ``runner``, kept in ``journal``, judged by ``judge`` for progress."""

    def __init__(self, plan: Plan, pairs: int, more: int, runner: Runner, journal: Journal,
                 judge: Judge, progress: Progress, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self.plan, self.pairs, self.more = plan, pairs, more
        self.runner, self.journal, self.judge, self.progress = runner, journal, judge, progress
        self.deadline, self.clock = deadline, clock
        self.cases = [name for lane in plan.lanes for name in lane]
        self.remaining: list[list[str]] = [[] for _ in plan.lanes]
        self.decided: dict[str, bool] = {}
        self.seconds: list[float] = []  # of each block run here
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> Outcome:
        active = [lane for lane, cases in enumerate(self.plan.lanes) if cases]
        if self.journal.entries:  # a resumed A/B: its completed pairs are not run again
            self.progress.write(f"resuming: {len(self.journal.entries)} completed blocks kept "
                                f"from {self.journal.folder}")  # fmt: skip
        self._judged(self.cases)
        with ThreadPoolExecutor(max_workers=max(len(active), 1)) as pool:
            futures = [pool.submit(self._lane, lane) for lane in active]
            try:
                pending = set(futures)
                while pending and not any(f.exception() for f in futures if f.done()):
                    pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)[1]
            except BaseException:  # an interrupt: the lanes' blocks end with their processes
                self.stop()
                raise
            failed = [f.exception() for f in futures if f.done() and f.exception()]
            if failed:
                self.stop()
                raise failed[0]
        return Outcome(self.evidence(self.cases), self.remaining)

    def interrupted(self) -> Outcome:
        """What the completed blocks show, every case of the plan left undecided."""
        return Outcome(self.evidence(self.cases), [list(self.cases)])

    def stop(self) -> None:
        self.stopping.set()
        self.runner.stop()

    def evidence(self, names: list[str], first: int | None = None) -> list[Evidence]:
        """``names`` grouped by the completed pairs that ran them (of their ``first`` pairs,
        default all), each group with those pairs in the order of the pairs."""
        groups: dict[tuple, list[str]] = {}
        for name in names:
            found = complete_pairs(self.journal, name)
            keys = sorted((p, lane) for p, lane in found.items() if first is None or p < first)
            groups.setdefault(tuple(keys), []).append(name)
        evidence = []
        for keys, members in groups.items():
            pairs = [Pair(self.journal.done(lane, p, A).run, self.journal.done(lane, p, B).run,
                          b_first(p)) for p, lane in keys]  # fmt: skip
            evidence.append((members, pairs))
        return evidence

    def verdicts(self, names: list[str], first: int | None = None) -> list[GateResult]:
        """Each of ``names`` judged on its completed pairs (of its ``first``)."""
        found = []
        for members, pairs in self.evidence(names, first):
            wanted = set(members)
            found += [r for r in self.judge(pairs) if r.name in wanted] if pairs else []
        return found

    def _judged(self, names: list[str]) -> None:
        """Count each of ``names`` decided once its verdict is final: decided on its first pairs
        (it runs no more), or on all its pairs once its more pairs ran too. An interim verdict
        is not counted, so the count never goes down."""
        wanted = [n for n in names if self._ran(n, range(self.pairs))]
        first = {r.name for r in self.verdicts(wanted, self.pairs) if r.verdict in AB_DECIDED}
        more = range(self.pairs, self.pairs + self.more)
        after = [n for n in wanted if n not in first and self._ran(n, more)]
        last = {r.name for r in self.verdicts(after) if r.verdict in AB_DECIDED}
        with self.lock:
            self.decided.update({name: name in first or name in last for name in names})

    def _ran(self, name: str, pairs: range) -> bool:
        done = complete_pairs(self.journal, name)
        return all(pair in done for pair in pairs)

    def _lane(self, lane: int) -> None:
        cases = self.plan.lanes[lane]
        try:
            for pair in sorted({p for name in cases for p in self.plan.todo[name]}):
                self._pair(lane, pair, [n for n in cases if pair in self.plan.todo[n]])
        except _Deadline:  # those of its cases that are not decided remain (verdicts)
            self.remaining[lane] = list(cases)
            return
        except _Stopped:
            return
        try:
            again = sorted(undecided(self.verdicts(cases, self.pairs), self.more))
            if again and self.more:
                more = range(self.pairs, self.pairs + self.more)
                left = {p: [n for n in again if p not in complete_pairs(self.journal, n)]
                        for p in more}  # fmt: skip
                self.progress.grow(2 * sum(bool(names) for names in left.values()))
                self.progress.write(f"lane {lane + 1}: {len(again)} undecided, {self.more} more "
                                    "block pairs for them")  # fmt: skip
                for pair in more:
                    self._pair(lane, pair, left[pair])
        except _Deadline:
            self.remaining[lane] = again
        except _Stopped:
            pass

    def _pair(self, lane: int, pair: int, cases: list[str]) -> None:
        if not cases:
            return
        if self.deadline is not None and self.clock() + self._pace() * 2 > self.deadline:
            raise _Deadline
        for label in pair_order(pair):
            if self.stopping.is_set():
                raise _Stopped
            block = Block(self.plan.first + lane, pair, label, tuple(cases))
            report = self.journal.block_file(block.lane, pair, label, ".json")
            report.unlink(missing_ok=True)  # a block that did not complete: run again
            started = self.clock()
            run = self.runner.run(block, lane, report, report.with_suffix(".log"))
            seconds = self.clock() - started
            report = self.journal.compact(report)
            self.journal.record(Entry(block, run, seconds), report,
                                self.runner.pids())  # fmt: skip
            self._stepped(lane, block, seconds)

    def _pace(self) -> float:
        """Seconds a block took so far here (0 before the first)."""
        with self.lock:
            return sum(self.seconds) / len(self.seconds) if self.seconds else 0.0

    def _stepped(self, lane: int, block: Block, seconds: float) -> None:
        if block.label != pair_order(block.pair)[0]:  # the pair is complete: judge its cases
            self._judged(list(block.cases))
        with self.lock:
            self.seconds.append(seconds)
            where = f" lane {lane + 1}," if len(self.plan.lanes) > 1 else ""
            self.progress.step(
                f"pair {block.pair + 1}{where} {block.label}: {len(block.cases)} cases in "
                f"{duration(seconds)}; {sum(self.decided.values())} of {len(self.cases)} cases "
                "decided"
            )
