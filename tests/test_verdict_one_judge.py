"""One judge: the gate, ``perfgate compare``, ``perfgate ab``, the nightly's A/B and ``perfgate
bisect``'s steps reach the same verdict on the same measurements, for every reason a case is not
gated and for every rule. A side's rounds come in blocks: ab and the nightly pair A's block i
with B's block i; the gate, compare and bisect see every block of a side as one run's rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import entry, perfgate, rounds, run_json, run_of

from perfgate.ab import bisect_steps
from perfgate.ab.order import b_first
from perfgate.benchmark import Run, run_from_json
from perfgate.verdict import Verdict, judge, nightly, parse_thresholds
from perfgate.verdict.noise import DEVICE_CLOCK, DEVICE_FLOOR
from perfgate.verdict.paired import judge_blocks
from perfgate.verdict.reason import Reason
from perfgate.verdict.rows import GateRow

NAME = "perf_tests/test_x.py::test_kernel"
PARTNER = "perf_tests/test_x.py::test_kernel[ref]"  # the same test, another "impl"
BLOCKS, ROUNDS = 5, 6
DEVICE = {"clock": DEVICE_CLOCK}


def blocks(factor: float, seed: int, cv: float, n: int = BLOCKS, per: int = ROUNDS) -> list:
    """``n`` blocks of ``per`` rounds around 1 ms times ``factor``, lognormal noise ``cv``."""
    return [rounds(seed + i, factor, per, cv) for i in range(n)]


class Side:
    """One tree's measurements in blocks (None: saved without per-round data), what each
    stored beside them, and the run's facts (``untrusted``). ``partner``: the blocks of a
    reference case that NAME's same-run ratio divides by (parameter ``impl``)."""

    def __init__(self, samples, extra: dict, declared=None, facts=None, partner=None):
        self.samples, self.extra, self.declared = samples, extra, declared
        self.facts, self.partner = facts or {}, partner

    def _entries(self, samples, partner) -> list[dict]:
        params = {"impl": "fast"} if self.partner else {}
        median = 1e-3 if samples is None else None  # saved by pytest-benchmark alone
        found = [entry(NAME, samples, params, self.extra, self.declared, median)]
        if self.partner:
            found.append(entry(PARTNER, partner, {"impl": "ref"}, DEVICE, self.declared))
        return found

    def whole(self) -> dict:
        merged = None if self.samples is None else sum(self.samples, [])
        partner = sum(self.partner, []) if self.partner else None
        return run_json(*self._entries(merged, partner), **self.facts)

    def block_runs(self) -> list[Run]:
        count = len(self.samples) if self.samples is not None else BLOCKS
        return [
            run_of(*self._entries(None if self.samples is None else self.samples[i],
                                  self.partner[i] if self.partner else None), **self.facts)
            for i in range(count)
        ]  # fmt: skip


def five_paths(tmp_path: Path, a: Side, b: Side, given: str | None = None) -> dict:
    """The verdict row of NAME on each path: gate, compare, ab, nightly, bisect."""
    thresholds = parse_thresholds([given] if given else [])
    a_blocks, b_blocks = a.block_runs(), b.block_runs()
    a_json, b_json = a.whole(), b.whole()
    a_file, b_file = tmp_path / "a.json", tmp_path / "b.json"
    a_file.write_text(json.dumps(a_json))
    b_file.write_text(json.dumps(b_json))
    a_run = run_of(*a_json["benchmarks"], **a.facts)
    b_run = run_of(*b_json["benchmarks"], **b.facts)
    paths = {}
    gate = {r.name: r for r in judge([a_run], b_run, thresholds, confirmation=b_run)}[NAME]
    paths["gate"] = (gate.verdict, gate.reason, gate.threshold)
    argv = ["compare", str(a_file), str(b_file), "--json"] + (
        ["--threshold", given] if given else []
    )
    status, out, err = perfgate(*argv)
    assert status == 0, err
    (row,) = [r for r in json.loads(out)["rows"] if r["name"] == NAME]
    compared = Verdict(row["verdict"])
    reason = Reason(row["reason"]) if row["reason"] else None
    paths["compare"] = (compared, reason, row["threshold"])
    pairs = [(a, b, b_first(i)) for i, (a, b) in enumerate(zip(a_blocks, b_blocks, strict=True))]
    results = {r.name: r for r in judge_blocks(pairs, thresholds)}  # in the A/B's order
    paired = results[NAME]
    paths["ab"] = (paired.verdict, paired.reason, paired.threshold)
    stored = GateRow.of(gate)
    why = nightly.ab_reason(stored, 0.01, 0.03) or "sent to the A/B by this test"
    night = nightly.night(stored, why, paired)
    paths["nightly"] = (night.verdict, night.row.reason, paired.threshold)
    step, cases = bisect_steps.judge(a_file, b_file, thresholds.default, 0.01, a_file)
    (case,) = [c for c in cases if c.name == NAME.split("::")[-1]]
    paths["bisect"] = (case.verdict, case.reason, case.threshold, step)
    return paths


def same(paths: dict, verdict: Verdict, reason: Reason | None = None) -> None:
    """Every path says ``verdict`` (compare and bisect, which confirm nothing, may say
    unconfirmed for a regression; the nightly decides a regression) and ``reason``."""
    for path, (found, why, *_) in paths.items():
        if verdict is Verdict.REGRESSION and path in ("compare", "bisect"):
            assert found.slower, (path, paths)
        else:
            assert found is verdict, (path, paths)
        assert why is reason, (path, paths)
    expected_step = {Verdict.NOT_GATED: bisect_steps.SKIP, Verdict.UNDECIDED: bisect_steps.SKIP,
                     Verdict.REGRESSION: bisect_steps.BAD}  # fmt: skip
    assert paths["bisect"][3] == expected_step.get(verdict, bisect_steps.GOOD), paths


QUIET = blocks(1.0, 0, 0.002)


@pytest.mark.parametrize(
    "a, b, reason",
    [
        pytest.param(
            Side(QUIET, DEVICE),
            Side(
                blocks(1.5, 100, 0.002),
                DEVICE,
                facts={"untrusted": ["other processes on the GPU: pid 1 (10 MiB)"]},
            ),
            Reason.UNTRUSTED_GPU,
            id="untrusted-gpu",
        ),  # fmt: skip
        pytest.param(
            Side(QUIET, DEVICE),
            Side(blocks(1.5, 100, 0.002), {"host_bound": True}),
            Reason.HOST_BOUND,
            id="host-bound",
        ),  # fmt: skip
        pytest.param(
            Side(QUIET, {**DEVICE, "code_path": "tile"}),
            Side(blocks(1.5, 100, 0.002), {**DEVICE, "code_path": "dequantize-once"}),
            Reason.OTHER_CODE,
            id="other-code",
        ),  # fmt: skip
        pytest.param(
            Side(None, DEVICE), Side(blocks(1.5, 100, 0.002), DEVICE), Reason.NO_DATA, id="no-data"
        ),  # fmt: skip
        pytest.param(
            Side(blocks(1.0, 0, 0.5), DEVICE),
            Side(blocks(1.02, 100, 0.5), DEVICE),
            Reason.TOO_NOISY,
            id="too-noisy",
        ),  # fmt: skip
    ],
)
def test_every_path_declines_what_the_gate_declines_for_the_same_reason(tmp_path, a, b, reason):
    same(five_paths(tmp_path, a, b), Verdict.NOT_GATED, reason)


def test_every_path_leaves_too_few_rounds_undecided(tmp_path):
    few = Side(blocks(1.0, 0, 0.002, n=1, per=2), DEVICE)
    paths = five_paths(tmp_path, few, Side(blocks(3.0, 100, 0.002, n=1, per=2), DEVICE))
    same(paths, Verdict.UNDECIDED, Reason.TOO_FEW_ROUNDS)


def test_a_slowdown_past_even_a_noisy_cases_loose_threshold_fails_on_every_path(tmp_path):
    """Issue 30: a noisy baseline once let a 4x slowdown pass as "too noisy"."""
    noisy = Side(blocks(1.0, 0, 0.5), DEVICE)
    four_times = Side(blocks(4.0, 100, 0.05), DEVICE)
    paths = five_paths(tmp_path, noisy, four_times)
    same(paths, Verdict.REGRESSION)
    assert all(threshold > 0.25 for _, _, threshold, *_ in paths.values())  # past the ceiling


@pytest.mark.parametrize(
    "factor, declared, given, verdict",
    [
        (1.05, None, None, Verdict.REGRESSION),  # past the 2 % device floor
        (1.01, None, None, Verdict.UNCHANGED),  # within it
        (0.90, None, None, Verdict.IMPROVEMENT),
        (1.15, {"threshold": 0.3}, None, Verdict.UNCHANGED),  # the marker wins
        (1.40, {"threshold": 0.3}, None, Verdict.REGRESSION),
        (1.08, None, "5%", Verdict.REGRESSION),  # a threshold given decides every path alike
        (1.08, None, "0.1", Verdict.UNCHANGED),
        (2.80, None, "150%", Verdict.REGRESSION),  # a threshold past 100 %
        (2.20, None, "150%", Verdict.UNCHANGED),
    ],
)
def test_the_time_rule_at_the_gates_threshold_on_every_path(
    tmp_path, factor, declared, given, verdict
):
    a = Side(QUIET, DEVICE, declared)
    b = Side(blocks(factor, 100, 0.002), DEVICE, declared)
    paths = five_paths(tmp_path, a, b, given)
    same(paths, verdict)
    thresholds = {threshold for _, _, threshold, *_ in paths.values()}
    assert len({round(t, 9) for t in thresholds}) == 1, paths
    if declared is None and given is None:  # quiet rounds: the device floor, not 10 %
        assert thresholds == {DEVICE_FLOOR}


HOST = {"host_bound": True}
COUNTED = {"measure": "instructions", "counters": {"aten_ops": 3}}


@pytest.mark.parametrize(
    "before, now",
    [
        pytest.param({**DEVICE, "peak_bytes": 1000}, {**DEVICE, "peak_bytes": 2000}, id="memory"),
        pytest.param(
            {**COUNTED, "instructions": 1000}, {**COUNTED, "instructions": 1100}, id="instructions"
        ),  # fmt: skip
        pytest.param(
            {**COUNTED, "instructions": 1000},
            {**COUNTED, "instructions": 1000, "counters": {"aten_ops": 4}},
            id="exact-counters",
        ),  # fmt: skip
        pytest.param(
            {**HOST, "launch_counts": {"kernel_launches": 4}},
            {**HOST, "launch_counts": {"kernel_launches": 5}},
            id="launch-counts",
        ),
    ],
)
def test_every_rule_fails_alike_on_every_path(tmp_path, before, now):
    same(five_paths(tmp_path, Side(QUIET, before), Side(QUIET, now)), Verdict.REGRESSION)


def test_a_lost_same_run_ratio_fails_alike_on_every_path(tmp_path):
    """NAME's time is unchanged; its speedup over the reference fell with the reference's time."""
    ratio = {"ratios": [{"name": "speedup", "key": "impl", "reference": "ref"}]}
    a = Side(QUIET, DEVICE, ratio, partner=blocks(2.0, 50, 0.002))
    b = Side(blocks(1.0, 100, 0.002), DEVICE, ratio, partner=blocks(1.2, 150, 0.002))
    same(five_paths(tmp_path, a, b), Verdict.REGRESSION)


def _block(samples, health: dict | None, name: str) -> Run:
    data = run_json(entry(NAME, samples, extra=DEVICE))
    if health is not None:
        data["machine_info"]["perfgate"]["gpu_health"] = health
    return run_from_json(data, Path(name))


def _health(throttled: bool, others: list[str]) -> dict:
    reasons = ["GPU throttling (reasons 0x20)"] if throttled else []
    reasons += [f"other processes on the GPU: {'; '.join(others)}"] if others else []
    return {"available": True, "other_processes": others, "trusted": not reasons,
            "untrusted_reasons": reasons}  # fmt: skip


@pytest.mark.parametrize(
    "throttled, others, trusted",
    [(True, [], True), (False, ["pid 7 (824 MiB)"], False), (True, ["pid 7 (824 MiB)"], False)],
)
def test_an_ab_block_that_began_throttled_is_trusted_another_process_is_not(
    throttled, others, trusted
):
    """Both trees take turns on one GPU, sharing its heat and power (seen on two H200s: GPU 0 at
    70 C reported a thermal slowdown at the start of 8 of its 12 blocks, and every case of its
    lane read 'not gated' though its pairs were clean); another process on it still counts."""
    from perfgate.verdict.paired import judge_blocks

    pairs = []
    for i in range(4):
        health = _health(throttled, others) if i == 2 else _health(False, [])
        a = _block(rounds(i, 1.0, ROUNDS, 0.002), health, f"lane0-pair{i}-A.json")
        b = _block(rounds(50 + i, 1.05, ROUNDS, 0.002), _health(False, []), f"lane0-pair{i}-B.json")
        pairs.append((a, b, i % 2 == 1))
    (result,) = judge_blocks(pairs, parse_thresholds([]))
    if trusted:
        assert result.verdict is Verdict.REGRESSION, result.message
    else:
        assert (result.verdict, result.reason) == (Verdict.NOT_GATED, Reason.UNTRUSTED_GPU)
        assert "lane0-pair2-A.json: other processes on the GPU: pid 7" in result.message
