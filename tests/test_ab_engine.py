"""The A/B's engine (``perfgate.ab``) with fake block runners on a virtual clock: the
counterbalanced order against a linear drift, the journal (interrupt after k block pairs, resume,
the same verdicts, no completed block run again), the time limit, and the lanes: fake GPU lists
of 1, 2, 4 and 8, each case on one GPU for its A and its B blocks, the lanes at the same time."""

from __future__ import annotations

import io
import json
import re
import threading
import zlib
from pathlib import Path

import pytest
from helpers import entry, rounds_at, run_json

from perfgate import parts, store
from perfgate.ab import AbError, gpus, journal, night
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
        self.gpu_of: dict[tuple, int] = {}  # the GPU each block ran on
        self.slots: dict[int, int] = {}
        self.lock = threading.Lock()
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def run(self, block: Block, gpu: int, report: Path, log: Path):
        with self.lock:
            if self.stop_at is not None and len(self.ran) == self.stop_at:
                raise KeyboardInterrupt
            self.ran.append(block)
            self.gpu_of[block.key] = gpu
            slot = self.slots[gpu] = self.slots.get(gpu, -1) + 1
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
    cases = sorted(name for lane in lanes for name in lane)
    return {"cases": cases, "blocks": pairs, "more_blocks": more, "gpus": [None] * len(lanes)}


def run_engine(folder: Path, runner: VirtualBlocks, lanes: list[list[str]], pairs: int,
               more: int = 0, resume: bool = False, deadline: float | None = None,
               stored: dict | None = None, groups: dict | None = None,
               progress: Progress | None = None):  # fmt: skip
    """The engine's outcome and each case's verdict (name -> GateResult). ``lanes``: the cases
    of each lane, kept together (equal costs put each group on a lane of its own), unless
    ``groups`` says otherwise."""
    journal.check_start(folder, resume)
    kept = journal.Journal.open(folder, plan(lanes, pairs, more), resume)
    options = AbOptions("A", thresholds=Thresholds(default=0.03))
    names = [name for lane in lanes for name in lane]
    groups = groups or {name: f"lane {i}" for i, lane in enumerate(lanes) for name in lane}
    planned = engine_module.plan(names, pairs, more, len(lanes), kept, stored, groups)
    progress = progress or Progress(planned.blocks(), "A/B blocks", None, lines=False)
    engine = Engine(planned, pairs, more, runner, kept, judge(options, len(names)), progress,
                    deadline, runner.clock)  # fmt: skip
    try:
        outcome = engine.run()
        stopped = None if outcome.complete else "time limit"
    except KeyboardInterrupt:
        outcome = engine.interrupted()
        stopped = "interrupted"
    done = verdicts(outcome, names, judge(options, len(names)), "abc", stopped, {}, len(lanes))
    return done, {r.name: r for r in done.results}


def case_pairs(runner: VirtualBlocks) -> set[tuple[str, int]]:
    """(case, pair) of every pair a runner ran whole, its A and B blocks on one lane."""
    ran = {b.key: b for b in runner.ran}
    return {(name, b.pair) for b in ran.values() if b.label == A
            and (other := ran.get((b.lane, b.pair, B))) for name in b.cases
            if name in other.cases}  # fmt: skip


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
    assert not case_pairs(interrupted) & case_pairs(again)  # no completed pair ran again
    assert case_pairs(interrupted) | case_pairs(again) == case_pairs(whole)
    assert len(interrupted.ran) >= 4 * k


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
        ran_on = {(b.label, devices[runner.gpu_of[b.key]]) for b in runner.ran if name in b.cases}
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


# --- lanes balanced by what a case's blocks cost --------------------------------------------------
class LaneClocks(VirtualBlocks):
    """Blocks on one virtual clock per GPU: a block takes the sum of its cases' ``seconds``
    (a case's block: its setup, warm-up, compile and rounds), the lanes at the same time."""

    def __init__(self, seconds: dict[str, float], **options):
        super().__init__(**options)
        self.seconds, self.at, self.lane = seconds, {}, threading.local()

    def clock(self) -> float:
        gpu = getattr(self.lane, "gpu", None)
        return self.at.get(gpu, 0.0) if gpu is not None else max(self.at.values(), default=0.0)

    def run(self, block: Block, gpu: int, report: Path, log: Path):
        self.lane.gpu = gpu
        run = super().run(block, gpu, report, log)
        self.at[gpu] = self.at.get(gpu, 0.0) + sum(self.seconds[name] for name in block.cases)
        return run


def skewed_night() -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """The 2-GPU night's 24 cases: (seconds a block of each takes, seconds of its timed rounds,
    its group). Two cold-start cases, ratio partners that share a session, time all their
    rounds (13 s a block for the two, 10 s of it timed); 22 steady-state compiled cases spend a
    block compiling and warming up (102 s a block for the 22, 1 s of it timed)."""
    cold = {f"perf_tests/test_compile.py::test_calls[{mode}]": took
            for mode, took in (("compiled", 7.0), ("eager", 6.0))}  # fmt: skip
    steady = {f"perf_tests/test_compile.py::test_steady[{i}]": 4.27 + 0.73 * i / 21
              for i in range(22)}  # fmt: skip
    timed = {name: 5.0 if name in cold else 0.05 for name in [*cold, *steady]}
    groups = {name: "calls" if name in cold else name for name in [*cold, *steady]}
    return cold | steady, timed, groups


def stored_comparison(results: Path, seconds: dict[str, float], timed: dict[str, float]) -> None:
    """What the night's stored comparison leaves: junit.xml with each case's seconds, and
    nightly.json with its timed rounds."""
    results.mkdir(parents=True, exist_ok=True)
    cases = "".join(f'<testcase classname="{night.junit_name(name)[0]}" '
                    f'name="{night.junit_name(name)[1]}" time="{took}"/>'
                    for name, took in seconds.items())  # fmt: skip
    (results / "junit.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    rounds = [entry(name, [timed[name] / 5] * 5) for name in seconds]
    (results / "nightly.json").write_text(json.dumps(run_json(*rounds)))


def test_lanes_balanced_by_block_cost_end_the_skewed_night_in_60_percent_of_its_time(tmp_path):
    seconds, timed, groups = skewed_night()
    stored_comparison(tmp_path / "results", seconds, timed)
    wanted = night.ab_options(night.NightlyOptions(tmp_path / "results"), "abc", list(seconds))
    assert wanted.costs == pytest.approx(seconds)  # a block's seconds, not its timed rounds'
    ended = {}
    rounds_only = parts.durations(store.load(tmp_path / "results" / "nightly.json"))
    for how, costs in (("today", rounds_only), ("by block cost", wanted.costs)):
        runner = LaneClocks(seconds)
        done, found = run_engine(tmp_path / how, runner, [list(seconds), []], 3, more=3,
                                 stored=costs, groups=groups)  # fmt: skip
        assert done.stopped is None and len(found) == 24
        assert all(result.verdict is Verdict.UNCHANGED for result in found.values())
        ended[how] = max(runner.at.values())
        lanes = [{n for b in runner.ran if runner.gpu_of[b.key] == g for n in b.cases}
                 for g in (0, 1)]  # fmt: skip
        if how == "today":  # the cold pair on one lane, the 22 compiled cases on the other
            assert sorted(len(lane) for lane in lanes) == [2, 22]
    assert ended["by block cost"] <= 0.6 * ended["today"], ended


def test_the_plan_gives_each_lane_its_cases_and_estimated_seconds(tmp_path):
    seconds, _, _ = skewed_night()
    kept = journal.Journal.open(tmp_path, plan([list(seconds)], 3), resume=False)
    planned = engine_module.plan(list(seconds), 3, 3, 2, kept, seconds, {n: n for n in seconds})
    lines = planned.lines(["GPU-a", "GPU-b"])
    assert [line.split(":")[0] for line in lines] == ["lane 1 on GPU GPU-a", "lane 2 on GPU GPU-b"]
    assert sorted(len(lane) for lane in planned.lanes) == [12, 12]
    total = 6 * sum(seconds.values())
    assert sum(planned.seconds) == pytest.approx(total)
    assert max(planned.seconds) < 0.52 * total
    assert "12 cases, 36 of their block pairs to run, about " in lines[0]
    unknown = engine_module.plan(list(seconds), 3, 3, 2, kept)  # no costs: no estimate
    assert unknown.seconds == [None, None] and "about" not in unknown.lines([None, None])[0]


def test_a_block_shares_its_seconds_among_its_cases_by_their_stored_cost():
    stored = {"a": 1.0, "b": 3.0}
    ran = [(("a", "b"), 40.0), (("a", "b", "c"), 60.0), (("c",), 10.0)]
    found = engine_module.block_seconds(["a", "b", "c", "d"], stored, ran)
    # block 2: c weighs as the mean of a and b (2): 60 s shared 1:3:2
    assert found == pytest.approx({"a": (10 + 10) / 2, "b": (30 + 30) / 2, "c": (20 + 10) / 2})
    assert engine_module.block_seconds(["a", "d"], stored, []) == {"a": 1.0}


def test_a_resumed_ab_plans_again_from_the_blocks_it_measured_and_a_case_may_move(tmp_path):
    # the stored comparison said every case costs the same (cases 0, 2, 4 on the first lane);
    # the blocks say cases 0 and 2 cost ten times more: the resumed A/B moves one of them to the
    # other lane, and decides as an uninterrupted A/B does
    names = [f"perf_tests/test_x.py::test_x[{i}]" for i in range(6)]
    costly = [names[0], names[2]]
    seconds = {name: 100.0 if name in costly else 10.0 for name in names}
    stored = dict.fromkeys(names, 1.0)
    slower = {B: {names[0]: 1.2e-3}}
    lanes, groups = [names[:3], names[3:]], {name: name for name in names}
    whole = LaneClocks(seconds, cost=slower)
    _, expected = run_engine(tmp_path / "whole", whole, lanes, 3, stored=stored, groups=groups)
    first = LaneClocks(seconds, cost=slower, stop_at=4)  # each lane's first pair, then Ctrl-C
    run_engine(tmp_path / "night", first, lanes, 3, stored=stored, groups=groups)
    again = LaneClocks(seconds, cost=slower)
    done, found = run_engine(tmp_path / "night", again, lanes, 3, resume=True, stored=stored,
                             groups=groups)  # fmt: skip
    assert done.stopped is None and found == expected
    gpus_of = {name: {first.gpu_of[b.key] for b in first.ran if name in b.cases} for name in names}
    moved = [n for n in names for b in again.ran if n in b.cases and again.gpu_of[b.key]
             not in gpus_of[n]]  # fmt: skip
    assert {first.gpu_of[b.key] for b in first.ran if set(b.cases) & set(costly)} == {0}
    assert moved  # a case ran on another GPU after the resume
    costly_gpus = {n: {again.gpu_of[b.key] for b in again.ran if n in b.cases} for n in costly}
    assert costly_gpus[costly[0]] != costly_gpus[costly[1]]  # now on lanes of their own
    assert not case_pairs(first) & case_pairs(again)  # no completed pair ran again


def test_the_count_of_decided_cases_is_of_every_lane_and_never_goes_down(tmp_path):
    # interim verdicts (after one or two pairs) are not counted: a case counts once its verdict
    # is final, and the total is every lane's cases
    slower = {B: {CASES[0]: 1.2e-3, CASES[2]: 1.04e-3, CASES[4]: 1.04e-3}}
    spread = {CASES[2]: 0.05, CASES[4]: 0.05}
    runner = VirtualBlocks(slower, spread=spread)
    out = io.StringIO()
    progress = Progress(0, "A/B blocks", out, clock=runner.clock)
    lanes = [CASES[:2], CASES[2:4], CASES[4:]]
    done, found = run_engine(tmp_path / "j", runner, lanes, 3, more=2, progress=progress)
    counts = [re.search(r"(\d+) of (\d+) cases decided", line).groups()
              for line in out.getvalue().splitlines() if "cases decided" in line]  # fmt: skip
    assert counts and {total for _, total in counts} == {str(len(CASES))}
    decided = [int(n) for n, _ in counts]
    assert decided == sorted(decided)
    final = sum(result.verdict in engine_module.AB_DECIDED for result in found.values())
    assert decided[-1] == final


# --- compile caches: one per tree ----------------------------------------------------------------
SEES_ITS_CACHES = """\
import os, pathlib
caches = [os.environ.get(name, "") for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
pathlib.Path(f"seen-{os.getpid()}.txt").write_text("\\n".join(caches))


def test_x():
    pass
"""


def test_each_trees_block_processes_compile_into_a_cache_of_their_own(tmp_path):
    from perfgate.ab.compare import Processes

    trees = {label: tmp_path / label for label in (A, B)}
    for tree in trees.values():
        tree.mkdir()
        (tree / "test_sees.py").write_text(SEES_ITS_CACHES)
    folder = tmp_path / "results" / "ab-blocks"
    folder.mkdir(parents=True)
    processes = Processes(trees, [None, None], folder, [])  # two lanes: two processes a tree
    try:
        assert processes.collect(["test_sees.py"]) == {label: {"test_sees.py::test_x"}
                                                        for label in trees}  # fmt: skip
        processes.warm([[], ["test_sees.py"]])
    finally:
        processes.close()
    seen = {label: {tuple(f.read_text().splitlines()) for f in tree.glob("seen-*.txt")}
            for label, tree in trees.items()}  # fmt: skip
    assert all(len(list(tree.glob("seen-*.txt"))) == 2 for tree in trees.values())
    (a_caches,), (b_caches,) = seen[A], seen[B]  # one pair of folders a tree, on both lanes
    assert not set(a_caches) & set(b_caches)  # the trees never share one
    for label, caches in ((A, a_caches), (B, b_caches)):
        assert all(Path(c).is_relative_to(folder / "compile-cache" / label) for c in caches)
        assert len(set(caches)) == 2  # Inductor's and Triton's
