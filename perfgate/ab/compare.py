"""One A/B end to end: A's worktree, the block processes of both trees on each GPU, the cases
both trees collect, split over the GPUs, the counterbalanced block pairs (``engine``) kept in the
journal, and the one judge's verdict on each case (``verdict.paired``). ``perfgate ab`` and the
nightly run it; what it did is an ``AbRun``, written as ``ab.json`` by ``as_json`` (verdict rows,
versioned: ``verdict.rows``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfgate.ab import blocks, engine, journal, trees
from perfgate.ab.engine import Block, Engine, Outcome, Pair
from perfgate.ab.order import A, B
from perfgate.benchmark import Run
from perfgate.progress import Progress
from perfgate.verdict import paired, rows
from perfgate.verdict.judge import unmeasured
from perfgate.verdict.nightly import AB_DECIDED
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason
from perfgate.verdict.thresholds import Thresholds

INTERRUPTED, TIME_LIMIT = "interrupted", "time limit"


@dataclass
class AbOptions:
    base_ref: str
    selection: list[str] = field(default_factory=list)  # test paths and -k EXPR, to collect
    blocks: int = 5  # block pairs, counterbalanced
    more_blocks: int = 0  # more pairs for the cases the first ones leave undecided
    rounds_per_block: int | None = None  # keep at most this many rounds of a case per block
    pytest_args: list[str] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)
    outputs: Path = Path("perfgate-results")  # the A/B's outputs: not part of the tree under test
    journal: Path = Path("perfgate-results") / "ab-blocks"
    gpus: list[str | None] = field(default_factory=lambda: [None])
    resume: bool = False
    deadline: float | None = None  # time.monotonic() by which the A/B stops starting blocks
    wanted: list[str] | None = None  # only these cases (the nightly's); None: all collected
    costs: dict[str, float] | None = None  # seconds a block of a case takes, to balance the GPUs
    groups: dict[str, str] | None = None  # cases that must share a session (ratio partners)
    same_allowed: bool = False  # A may be the tree under test (the nightly's baseline commit)


@dataclass
class AbRun:
    """What an A/B did: A's commit, a verdict per case both trees ran, the cases it left
    undecided because it stopped (``stopped``: interrupted, time limit), the cases only one tree
    collected, and the lanes (GPUs) it ran on."""

    commit: str
    results: list[GateResult]
    remaining: list[str] = field(default_factory=list)
    stopped: str | None = None
    only: dict[str, list[str]] = field(default_factory=dict)
    lanes: int = 1


class Processes:
    """The block processes of ``trees`` (label -> tree), one per tree and lane (GPU), started
    at their first request: the engine's runner."""

    def __init__(self, trees: dict[str, Path], gpus: list[str | None], folder: Path,
                 pytest_args: list[str]):  # fmt: skip
        self.trees, self.gpus, self.folder, self.pytest_args = trees, gpus, folder, pytest_args
        self.processes: dict[tuple[int, str], blocks.BlockProcess] = {}

    def _process(self, gpu: int, label: str) -> blocks.BlockProcess:
        key = (gpu, label)
        if key not in self.processes:
            self.processes[key] = blocks.BlockProcess(self.trees[label], label, self.gpus[gpu],
                                                      self.folder)  # fmt: skip
        return self.processes[key]

    def collect(self, selection: list[str]) -> dict[str, set[str]]:
        """The node ids each tree collects with ``selection`` (test paths, -k), in the first
        lane's processes, both at once."""
        found = self._at_once([(0, label, selection) for label in self.trees])
        return dict(zip(self.trees, found, strict=True))

    def warm(self, lanes: list[list[str]]) -> None:
        """Start the other lanes' processes and import what their cases import (a collection
        of them), all at once, before any block is timed."""
        self._at_once([(lane, label, cases) for lane, cases in enumerate(lanes) if lane and cases
                       for label in self.trees])  # fmt: skip

    def _at_once(self, jobs: list[tuple[int, str, list[str]]]) -> list[set[str]]:
        def collect(job: tuple[int, str, list[str]]) -> set[str]:
            lane, label, selection = job
            log = self.folder / f"collect-lane{lane}-{label}.log"
            process = self._process(lane, label)
            return set(blocks.collect(process, selection, self.pytest_args, log))

        for lane, label, _ in jobs:
            self._process(lane, label)  # made here: the threads only use them
        pool = ThreadPoolExecutor(max_workers=max(len(jobs), 1))
        try:
            return list(pool.map(collect, jobs))
        finally:  # an interrupt: run_ab kills the processes, which ends the threads
            pool.shutdown(wait=False)

    def run(self, block: Block, gpu: int, report: Path, log: Path) -> Run:
        process = self._process(gpu, block.label)
        run = blocks.run_block(process, list(block.cases), self.pytest_args, report, log)
        return blocks.without_our_processes(run, self.pids())

    def pids(self) -> set[int]:
        return {p.pid for p in self.processes.values() if p.pid is not None}

    def stop(self) -> None:
        for process in self.processes.values():
            process.close(kill=True)

    def close(self) -> None:
        for process in self.processes.values():
            process.close()


def run_ab(options: AbOptions, err, cwd: Path | None = None,
           clock: Callable[[], float] = time.monotonic) -> AbRun:  # fmt: skip
    """Run the A/B of ``options`` (AbError: one line, exit 2). An interrupt ends it with what
    the completed blocks decided (``stopped``); the journal keeps them for ``resume``."""
    # absolute: the block processes run in the trees
    options = replace(options, journal=options.journal.resolve(), outputs=options.outputs.resolve())
    root = trees.repository_root(Path(cwd or Path.cwd()))
    commit = trees.resolve_commit(root, options.base_ref)
    if not options.same_allowed:
        trees.refuse_the_tree_under_test(root, commit, options.base_ref)
    with journal.only_one(options.journal):
        journal.check_start(options.journal, options.resume)
        tree = trees.state(root, options.outputs)
        try:
            options.journal.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise blocks.not_written(options.journal, error) from None
        return _in_trees(options, root, commit, tree, err, clock)


def _in_trees(options: AbOptions, root: Path, commit: str, tree: str, err, clock) -> AbRun:
    with trees.base_worktree(root, commit) as base:
        processes = Processes({A: base, B: root}, options.gpus, options.journal,
                              options.pytest_args)  # fmt: skip
        try:
            return _run(options, processes, commit, tree, err, clock)
        except BaseException:
            processes.stop()
            raise
        finally:
            processes.close()


def _run(options: AbOptions, processes, commit: str, tree: str, err, clock) -> AbRun:
    collected = processes.collect(options.selection)
    wanted = set(options.wanted) if options.wanted is not None else collected[A] | collected[B]
    both = sorted(collected[A] & collected[B] & wanted)
    only = {label: sorted((wanted & collected[label]) - collected[other])
            for label, other in ((A, B), (B, A))}  # fmt: skip
    if not both:
        return AbRun(commit, [], only=only)
    # the cases, not their lanes: a resumed A/B plans its lanes again, from what it measured
    wanted = {"base_commit": commit, "tree": tree, "cases": both, "gpus": options.gpus,
              "blocks": options.blocks, "more_blocks": options.more_blocks,
              "pytest_args": options.pytest_args,
              "rounds_per_block": options.rounds_per_block}  # fmt: skip
    kept = journal.Journal.open(options.journal, wanted, options.resume)
    plan = engine.plan(both, options.blocks, options.more_blocks, len(options.gpus), kept,
                       options.costs, options.groups)  # fmt: skip
    processes.warm(plan.lanes)
    used = sum(1 for cases in plan.lanes if cases)
    print(
        f"A/B of {len(both)} cases on {used} lane(s), {options.blocks} counterbalanced "
        f"block pairs (A B, B A, ...); blocks kept in {options.journal}",
        *plan.lines(options.gpus),
        sep="\n  ",
        file=err,
        flush=True,
    )
    with Progress(plan.blocks(), "A/B blocks", err, clock=clock) as progress:
        runs = Engine(plan, options.blocks, options.more_blocks, processes, kept,
                      judge(options, len(both)), progress, options.deadline, clock)  # fmt: skip
        stopped = None
        try:
            outcome = runs.run()
        except KeyboardInterrupt:
            stopped = INTERRUPTED
            outcome = runs.interrupted()
    if not outcome.complete:
        stopped = stopped or TIME_LIMIT
    done = verdicts(outcome, both, judge(options, len(both)), commit, stopped, only, used)
    if done.stopped == TIME_LIMIT and not done.remaining:  # every case decided in time
        done.stopped = None
    if done.stopped is None:
        kept.finish()
    return done


def judge(options: AbOptions, cases: int | None = None) -> Callable[[list[Pair]], list[GateResult]]:
    """The verdicts on one lane's pairs, its cases tested together with all ``cases`` of the
    A/B (every lane's; default: the lane's own)."""

    def verdicts_of(pairs: list[Pair]) -> list[GateResult]:
        if not pairs:
            return []
        return paired.judge_blocks(pairs, options.thresholds, options.rounds_per_block, cases)

    return verdicts_of


def verdicts(outcome: Outcome, cases: list[str], judged, commit: str, stopped: str | None,
             only: dict[str, list[str]], lanes: int) -> AbRun:  # fmt: skip
    """Each case judged on the block pairs that ran it; one the A/B stopped before is not
    gated."""
    wanted = set(cases)
    results = []
    for names, pairs in outcome.groups:
        kept = wanted & set(names)
        results += [r for r in judged(pairs) if r.name in kept] if pairs and kept else []
    seen = {r.name for r in results}
    for name in cases:
        if name not in seen:
            words = f"stopped ({stopped}) before its first block pair"
            results.append(unmeasured(name, words, Reason.STOPPED))
    results.sort(key=lambda r: (list(Verdict).index(r.verdict), r.name))
    stopped_cases = {name for lane in outcome.remaining for name in lane}
    remaining = [r.name for r in results if r.name in stopped_cases and r.verdict not in AB_DECIDED]
    return AbRun(commit, results, remaining, stopped, only, lanes)


def as_json(run: AbRun, options: AbOptions) -> dict:
    """ab.json: a file of verdict rows (``verdict.rows``, versioned) with what the A/B did."""
    done = [rows.GateRow.of(result).as_json() for result in run.results]
    order = "counterbalanced: A B, B A, ..."
    return rows.written(
        rows.AB,
        done,
        base_ref=options.base_ref,
        base_commit=run.commit,
        blocks=options.blocks,
        order=order,
        lanes=run.lanes,
        complete=run.stopped is None,
        stopped=run.stopped,
        remaining=run.remaining,
        only_in=run.only,
    )


def remaining_note(run: AbRun, journal_folder: Path) -> str | None:
    """One line for an A/B that stopped with cases undecided: how to continue."""
    if run.stopped is None:
        return None
    if not run.remaining:
        return f"the A/B was {run.stopped} once it had decided every case: all is written"
    return (f"the A/B stopped ({run.stopped}) with {len(run.remaining)} cases undecided; its "
            f"completed blocks are kept in {journal_folder}: run it again with --resume to "
            "continue")  # fmt: skip
