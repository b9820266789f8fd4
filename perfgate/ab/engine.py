"""The schedule of an A/B: each lane (a GPU, or the one lane of a CPU run) runs its cases' block
pairs in counterbalanced order (``order``), the lanes at the same time, one thread each; a lane's
cases that its first pairs leave undecided (slower past the threshold, not yet significantly)
run ``more`` pairs alone. Every completed block goes to the journal first, so a resumed A/B
skips it; a block whose journal entry exists is never run again. Progress after each block:
elapsed, an estimate of what remains, and how many cases are decided.

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
from perfgate.ab.order import A, B, b_first, pair_order
from perfgate.benchmark import Run
from perfgate.progress import Progress, duration
from perfgate.verdict.nightly import AB_DECIDED
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.time_change import more_needed


class Pair(NamedTuple):
    """One block pair of a lane: A's and B's results, and whether B ran first."""

    a: Run
    b: Run
    b_first: bool


Judge = Callable[[list[Pair]], list[GateResult]]


class Runner(Protocol):
    """Runs blocks: the block processes (``compare.Processes``), or a fake in the tests."""

    def run(self, block: Block, report: Path, log: Path) -> Run: ...
    def pids(self) -> set[int]: ...
    def stop(self) -> None: ...


@dataclass
class Outcome:
    """What the A/B did: its pairs per lane, the cases a deadline left unstarted (by lane)."""

    pairs: list[list[Pair]]
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


def within_reach(c, threshold: float | None, more: int) -> bool:
    needed = more_needed(c, threshold) if threshold is not None else None
    return needed is None or needed <= c.n_baseline + more


def decided(results: list[GateResult]) -> int:
    return sum(r.verdict in AB_DECIDED for r in results)


class Engine:
    """The block pairs of ``lanes`` (each lane's cases), ``pairs`` each, ``more`` more for the
    undecided; blocks by ``runner``, kept in ``journal``, judged by ``judge`` for progress."""

    def __init__(self, lanes: list[list[str]], pairs: int, more: int, runner: Runner,
                 journal: Journal, judge: Judge, progress: Progress,
                 deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self.lanes, self.pairs, self.more = lanes, pairs, more
        self.runner, self.journal, self.judge, self.progress = runner, journal, judge, progress
        self.deadline, self.clock = deadline, clock
        self.remaining: list[list[str]] = [[] for _ in lanes]
        self.decided = [0] * len(lanes)
        self.seconds: list[float] = []  # of each block run here
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> Outcome:
        active = [lane for lane, cases in enumerate(self.lanes) if cases]
        kept = sum(1 for lane, pair, _ in self.journal.entries if pair < self.pairs)
        if kept:  # a resumed A/B: its completed blocks are not run again
            self.progress.grow(-kept)
            self.progress.write(
                f"resuming: {kept} completed blocks kept from {self.journal.folder}"
            )
        self.decided = [decided(self.judge(self.pairs_of(lane))) for lane in range(len(self.lanes))]
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
        return Outcome([self.pairs_of(lane) for lane in range(len(self.lanes))], self.remaining)

    def stop(self) -> None:
        self.stopping.set()
        self.runner.stop()

    def pairs_of(self, lane: int, first: int | None = None) -> list[Pair]:
        """The lane's completed pairs (both blocks done) in order, of its ``first`` pairs
        (default: all)."""
        found = []
        for pair in range(self.pairs + self.more if first is None else first):
            a, b = self.journal.done(lane, pair, A), self.journal.done(lane, pair, B)
            if a is not None and b is not None:
                found.append(Pair(a.run, b.run, b_first(pair)))
        return found

    def _lane(self, lane: int) -> None:
        cases = self.lanes[lane]
        try:
            for pair in range(self.pairs):
                self._pair(lane, pair, cases)
            judged = self.judge(self.pairs_of(lane, self.pairs))
            again = sorted(set(undecided(judged, self.more)) & set(cases))
            if again and self.more:
                more = range(self.pairs, self.pairs + self.more)
                self.progress.grow(sum(not self.journal.done(lane, pair, label)
                                       for pair in more for label in (A, B)))  # fmt: skip
                self.progress.write(f"lane {lane + 1}: {len(again)} undecided, {self.more} more "
                                    "block pairs for them")  # fmt: skip
                for pair in more:
                    self._pair(lane, pair, again)
        except _Deadline as stop:
            self.remaining[lane] = list(stop.args[0])
        except _Stopped:
            pass

    def _pair(self, lane: int, pair: int, cases: list[str]) -> None:
        labels = [label for label in pair_order(pair) if not self.journal.done(lane, pair, label)]
        if not labels:
            return
        if self.deadline is not None and self.clock() + self._pace() * len(labels) > self.deadline:
            raise _Deadline(cases)
        for label in labels:
            if self.stopping.is_set():
                raise _Stopped
            block = Block(lane, pair, label, tuple(cases))
            report = self.journal.block_file(lane, pair, label, ".json")
            report.unlink(missing_ok=True)  # a block that did not complete: run again
            started = self.clock()
            run = self.runner.run(block, report, report.with_suffix(".log"))
            seconds = self.clock() - started
            self.journal.record(Entry(block, run, seconds), report,
                                self.runner.pids())  # fmt: skip
            self._stepped(block, seconds)

    def _pace(self) -> float:
        """Seconds a block took so far here (0 before the first)."""
        with self.lock:
            return sum(self.seconds) / len(self.seconds) if self.seconds else 0.0

    def _stepped(self, block: Block, seconds: float) -> None:
        with self.lock:
            self.seconds.append(seconds)
            if self.journal.done(block.lane, block.pair, A) and self.journal.done(
                block.lane, block.pair, B
            ):
                self.decided[block.lane] = decided(self.judge(self.pairs_of(block.lane)))
            cases = sum(len(c) for c in self.lanes)
            lane = f" lane {block.lane + 1}," if len(self.lanes) > 1 else ""
            self.progress.step(
                f"pair {block.pair + 1}{lane} {block.label}: {len(block.cases)} cases in "
                f"{duration(seconds)}; {sum(self.decided)} of {cases} cases decided"
            )
