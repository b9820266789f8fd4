"""The A/B's engine (``perfgate.ab``) with fake block runners on a virtual clock: the
counterbalanced order against a linear drift, the journal (interrupt after k block pairs, resume,
the same verdicts, no completed block run again), the time limit, and the lanes: fake GPU lists
of 1, 2, 4 and 8, each case on one GPU for its A and its B blocks, the lanes at the same time."""

from __future__ import annotations

import json
import threading
import zlib
from pathlib import Path

import pytest
from helpers import entry, rounds_at, run_json

from perfgate.ab import AbError, gpus, journal
from perfgate.ab import engine as engine_module
from perfgate.ab.children import environment
from perfgate.ab.compare import AbOptions, judge, verdicts
from perfgate.ab.engine import Block, Engine
from perfgate.ab.order import A, B, lanes_of, pair_order
from perfgate.progress import Progress
from perfgate.store import read_results
from perfgate.verdict import Verdict
from perfgate.verdict.paired import compare_paired_blocks
from perfgate.verdict.thresholds import Thresholds

CASES = [f"perf_tests/test_{f}.py::test_{f}[{p}]" for f in "abcd" for p in range(2)]


class VirtualBlocks:
    """Runs blocks on a virtual clock: a case takes ``cost[tree][case]`` seconds a round (1 ms by
    default), times ``(1 + drift) ** slot``, where slot counts the blocks its lane ran before (a
    steady drift, linear in time on the log scale the pairs compare on), with 1 % noise a round
    and ``spread[case]`` a block, drawn from (pair, tree, case) alone. Optionally interrupted at
    its ``stop_at``-th block, or waiting at ``barrier`` in each lane's first."""

    def __init__(self, cost: dict | None = None, drift: float = 0.0, stop_at: int | None = None,
                 barrier: threading.Barrier | None = None, spread: dict | None = None):  # fmt: skip
        self.cost, self.drift, self.stop_at, self.barrier = cost or {}, drift, stop_at, barrier
        self.spread = spread or {}  # case -> how far its blocks differ (fraction)
        self.ran: list[Block] = []
        self.slots: dict[int, int] = {}
        self.lock = threading.Lock()
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def run(self, block: Block, report: Path, log: Path):
        with self.lock:
            if self.stop_at is not None and len(self.ran) == self.stop_at:
                raise KeyboardInterrupt
            self.ran.append(block)
            slot = self.slots[block.lane] = self.slots.get(block.lane, -1) + 1
        if self.barrier is not None and slot == 0:
            self.barrier.wait(timeout=30)  # every lane's first block at once, or broken
        entries = []
        for name in block.cases:
            seconds = self.cost.get(block.label, {}).get(name, 1e-3) * (1 + self.drift) ** slot
            seed = zlib.crc32(f"{block.pair}{block.label}{name}".encode())
            seconds *= 1 + self.spread.get(name, 0.0) * (seed % 201 - 100) / 100
            entries.append(entry(name, rounds_at(seconds, seed, n=10, cv=0.01)))
        report.write_text(json.dumps(run_json(*entries)))
        self.now += 10.0  # a block takes 10 virtual seconds
        return read_results(report)

    def pids(self) -> set[int]:
        return set()

    def stop(self) -> None:
        pass


def plan(lanes: list[list[str]], pairs: int, more: int = 0) -> dict:
    return {"lanes": lanes, "blocks": pairs, "more_blocks": more, "gpus": [None] * len(lanes)}


def run_engine(folder: Path, runner: VirtualBlocks, lanes: list[list[str]], pairs: int,
               more: int = 0, resume: bool = False, deadline: float | None = None):  # fmt: skip
    """The engine's outcome and each case's verdict (name -> GateResult)."""
    journal.check_start(folder, resume)
    kept = journal.Journal.open(folder, plan(lanes, pairs, more), resume)
    options = AbOptions("A", thresholds=Thresholds(default=0.03))
    progress = Progress(2 * pairs * len(lanes), "A/B blocks", None, lines=False)
    engine = Engine(lanes, pairs, more, runner, kept, judge(options), progress, deadline,
                    runner.clock)  # fmt: skip
    try:
        outcome = engine.run()
        stopped = None if outcome.complete else "time limit"
    except KeyboardInterrupt:
        outcome = engine_module.Outcome([engine.pairs_of(i) for i in range(len(lanes))], lanes)
        stopped = "interrupted"
    names = [name for lane in lanes for name in lane]
    done = verdicts(outcome, names, judge(options), "abc", stopped, {}, len(lanes))
    return done, {r.name: r for r in done.results}


# --- counterbalanced order ----------------------------------------------------------------------
def test_pairs_alternate_which_tree_runs_first():
    assert [pair_order(i) for i in range(4)] == [(A, B), (B, A), (A, B), (B, A)]


@pytest.mark.parametrize("pairs", [3, 4, 5])
def test_a_linear_drift_biases_the_old_order_and_cancels_in_the_new(tmp_path, monkeypatch, pairs):
    # 4 % slower with every block, the same code in both trees: the old order (A B A B) puts
    # the later block of every pair on B and reads it 4 % slower: past the 3 % threshold, a
    # false regression
    lanes = [["perf_tests/test_a.py::test_a"]]
    _, new = run_engine(tmp_path / "new", VirtualBlocks(drift=0.04), lanes, pairs)
    monkeypatch.setattr(engine_module, "pair_order", lambda pair: (A, B))
    monkeypatch.setattr(engine_module, "b_first", lambda pair: False)
    _, old = run_engine(tmp_path / "old", VirtualBlocks(drift=0.04), lanes, pairs)
    (old_result,), (new_result,) = old.values(), new.values()
    assert old_result.comparison.ratio > 1.03 and old_result.verdict is Verdict.REGRESSION
    assert abs(new_result.comparison.ratio - 1) < 0.005
    assert new_result.verdict is not Verdict.REGRESSION


def test_the_paired_statistics_weigh_each_order_half():
    # 3 pairs, A B / B A / A B, a drift of 2 % a block (slots 0-5): the pair ratios read
    # +2 %, -2 %, +2 %, so equal weights read +0.7 %
    a = [1.02**0, 1.02**3, 1.02**4]
    b = [1.02**1, 1.02**2, 1.02**5]
    even = compare_paired_blocks(a, b)
    balanced = compare_paired_blocks(a, b, b_first=[False, True, False])
    assert even.ratio > 1.006 and balanced.ratio == pytest.approx(1.0)
    assert balanced.current_median / balanced.baseline_median == pytest.approx(balanced.ratio)
    with pytest.raises(ValueError, match="2 pair orders for 3 block pairs"):
        compare_paired_blocks(a, b, b_first=[False, True])


# --- the journal: interrupt, time limit, resume ---------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_a_resumed_ab_decides_as_an_uninterrupted_one_and_runs_no_block_twice(tmp_path, k):
    # a regression, an unchanged case, and one whose blocks differ by 2 %: 4 % slower, not yet
    # significant after 3 pairs but within reach of 2 more, which run for it alone
    slower = {B: {CASES[0]: 1.2e-3, CASES[2]: 1.04e-3}}
    lanes, spread = [CASES[:2], CASES[2:4]], {CASES[2]: 0.02}
    whole = VirtualBlocks(slower, spread=spread)
    _, expected = run_engine(tmp_path / "whole", whole, lanes, 3, more=2)
    assert len(whole.ran) == 2 * 2 * 3 + 2 * 2  # the more pairs ran
    interrupted = VirtualBlocks(slower, stop_at=4 * k + 1, spread=spread)
    first, _ = run_engine(tmp_path / "night", interrupted, lanes, 3, more=2)
    assert first.stopped == "interrupted"
    again = VirtualBlocks(slower, spread=spread)
    done, found = run_engine(tmp_path / "night", again, lanes, 3, more=2, resume=True)
    assert done.stopped is None and done.remaining == []
    assert found == expected
    ran_first = {(b.lane, b.pair, b.label) for b in interrupted.ran}
    ran_again = {(b.lane, b.pair, b.label) for b in again.ran}
    assert not ran_first & ran_again  # no completed block ran again
    assert len(ran_first) + len(ran_again) == len(whole.ran) and len(ran_first) >= 4 * k


def test_a_time_limit_stops_before_a_pair_that_cannot_end_in_time(tmp_path):
    runner = VirtualBlocks({B: {CASES[0]: 2e-3}})
    done, found = run_engine(tmp_path / "j", runner, [CASES[:2]], 5, deadline=65.0)
    # blocks take 10 virtual seconds: 6 blocks (3 pairs) end at 60 s, a fourth pair would not
    assert len(runner.ran) == 6 and done.stopped == "time limit"
    assert found[CASES[0]].verdict is Verdict.REGRESSION  # 3 pairs slower past 3 %: decided
    lines = (tmp_path / "j" / journal.NAME).read_text().splitlines()
    assert len(lines) == 1 + 6 and "complete" not in lines[-1]
    runner = VirtualBlocks({B: {CASES[0]: 2e-3}})
    done, found = run_engine(tmp_path / "k", runner, [CASES[:2]], 5, deadline=45.0)
    assert len(runner.ran) == 4 and done.remaining == CASES[:2]  # 2 pairs decide nothing
    assert all(found[name].verdict is Verdict.UNDECIDED for name in CASES[:2])


def test_a_journal_of_another_ab_is_not_resumed_and_an_unfinished_one_not_dropped(tmp_path):
    run_engine(tmp_path / "j", VirtualBlocks(stop_at=1), [CASES[:1]], 3)
    with pytest.raises(AbError, match="holds an unfinished A/B: continue it with --resume"):
        journal.check_start(tmp_path / "j", resume=False)
    with pytest.raises(AbError, match="is another one"):
        journal.Journal.open(tmp_path / "j", plan([CASES[:2]], 3), resume=True)
    with pytest.raises(AbError, match="no A/B to continue"):
        journal.check_start(tmp_path / "none", resume=True)


# --- lanes: one per GPU ------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_each_case_keeps_its_gpu_and_the_gpus_run_at_once(tmp_path, count):
    host = [f"GPU-{i:04x}" for i in range(count)]  # the GPUs this process may use, by UUID
    devices = gpus.lanes(None if count > 1 else "1", found=lambda: host)
    assert devices == (host if count > 1 else [None])
    names = [f"perf_tests/test_x.py::test_x[{i}]" for i in range(12)]
    lanes = lanes_of(names, len(devices), groups={name: name for name in names})
    assert all(lanes) and sorted(n for lane in lanes for n in lane) == sorted(names)
    runner = VirtualBlocks(barrier=threading.Barrier(count))  # broken unless lanes overlap
    done, found = run_engine(tmp_path / "j", runner, lanes, 3)
    assert set(found) == set(names) and done.stopped is None
    for name in names:
        ran_on = {(b.label, devices[b.lane]) for b in runner.ran if name in b.cases}
        assert {label for label, _ in ran_on} == {A, B} and len({g for _, g in ran_on}) == 1


@pytest.mark.parametrize(
    "spec, found, expected",
    [
        (None, [], [None]),
        (None, ["GPU-3"], [None]),  # one GPU: nothing to spread over
        ("auto", ["GPU-3", "GPU-5"], ["GPU-3", "GPU-5"]),
        ("2", [], ["0", "1"]),  # no NVML: CUDA's first two
        ("1", ["GPU-a", "GPU-b"], ["GPU-a"]),
        ("0,2", ["GPU-a"], ["0", "2"]),
    ],
)
def test_the_gpus_to_spread_over(spec, found, expected):
    assert gpus.lanes(spec, found=lambda: found) == expected


def test_without_nvml_the_gpus_are_cuda_visible_devices(monkeypatch):
    from perfgate.measure import gpu

    monkeypatch.setattr(gpu, "usable_gpus", lambda: [])
    assert gpus.usable({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    assert gpus.lanes(None, {"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]


@pytest.mark.parametrize("spec, words", [("0", "give 1 or more"), ("3", "may use 2 GPUs"),
                                         ("0,0", "distinct")])  # fmt: skip
def test_gpus_that_cannot_be_given_are_one_line(spec, words):
    with pytest.raises(AbError, match=words):
        gpus.lanes(spec, found=lambda: ["GPU-a", "GPU-b"])


def test_a_block_process_sees_its_gpu_and_no_xdist_worker(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    env = environment(tmp_path, "GPU-0001")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-0001" and "PYTEST_XDIST_WORKER" not in env
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)


def test_a_block_runs_its_own_cases_in_its_own_process():
    from perfgate.ab.blocks import block_arguments

    given = [
        "--device",
        "cuda",
        "--perf-shard",
        "1/2",
        "-n",
        "2",
        "--perf-tier=full",
        "-n4",
        "--numprocesses=auto",
        "--dist",
        "loadgroup",
        "--perf-shard=2/3",
        "-nauto",
        "-k",
        "x",
    ]
    assert block_arguments(given) == ["--device", "cuda", "--perf-tier=full", "-k", "x"]
