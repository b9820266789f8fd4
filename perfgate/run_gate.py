"""The noise-aware gate over one pytest run (``--perf-gate``).

After the benchmarks ran, each is compared with the baseline (per-round samples, same-run ratios,
peak memory). What looks slower is re-run once; only what fails again is a confirmed regression
and fails the run.

The baseline may be a set of runs saved one after another under one name (``baselines.
baseline_set``). Each benchmark is then compared with the set's slowest run of it, and each ratio
with its worst value in the set: how far a machine's own sessions differ from one another
(large on a shared CPU VM, docs/NOTES.md) is never counted as a regression.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from perfgate.counters import is_instructions
from perfgate.gate import BenchmarkPair, GateResult, RatioPair, Thresholds, Verdict, gate_results
from perfgate.stats import median


@dataclass(frozen=True)
class Measured:
    """One benchmark of one run: per-round seconds per call, parameters and extra facts."""

    fullname: str
    samples: list[float]
    params: dict = field(default_factory=dict)
    extra_info: dict = field(default_factory=dict)

    @property
    def test(self) -> str:
        """The test function's name: ``test_attention`` for ``...::test_attention[cuda-...]``."""
        return self.fullname.split("::")[-1].split("[")[0]

    @property
    def median(self) -> float:
        return median(self.samples)


def measured_from_session(benchmarks: Iterable) -> dict[str, Measured]:
    """pytest-benchmark's in-memory results (Metadata objects) by fullname; the last one wins."""
    measured = {}
    for bench in benchmarks:
        if bench and not bench.has_error:
            measured[bench.fullname] = Measured(
                bench.fullname, list(bench.stats.data), dict(bench.params or {}), bench.extra_info
            )
    return measured


def measured_from_run(benchmarks: Iterable[dict]) -> dict[str, Measured]:
    """A saved run's benchmarks by fullname. Without per-round data the median stands alone."""
    measured = {}
    for bench in benchmarks:
        stats = bench.get("stats", {})
        samples = stats.get("data") or [stats["median"]]
        measured[bench["fullname"]] = Measured(
            bench["fullname"], samples, bench.get("params") or {}, bench.get("extra_info") or {}
        )
    return measured


@dataclass(frozen=True)
class RatioRule:
    """A ratio of two benchmarks of one test that differ only in ``key`` (same run).

    With ``higher_is_better`` the ratio is reference / this (a speedup over the reference),
    else this / reference (a relative latency, e.g. MXINT8 over dense).
    """

    name: str
    test: str
    key: str
    reference: str
    higher_is_better: bool


RATIO_RULES = (
    RatioRule("speedup of compiled over eager", "test_resnet18_steady", "mode", "eager", True),
    RatioRule("speedup over naive attention", "test_attention", "implementation", "naive", True),
    RatioRule("latency relative to dense", "test_linear", "implementation", "dense", False),
    RatioRule("latency relative to fp32", "test_encoder", "variant", "fp32", False),
)
# extra_info fields that are already same-run ratios (higher is better)
RATIO_FIELDS = {"fraction_of_copy": "fraction of the copy roofline"}


def _context(measured: Measured, key: str) -> str:
    others = {k: v for k, v in measured.params.items() if k != key}
    return json.dumps(others, sort_keys=True, default=str)


def same_run_ratios(run: dict[str, Measured]) -> dict[str, list[tuple[str, float, bool, str]]]:
    """Ratios per benchmark: ``{fullname: [(name, value, higher_is_better, partner fullname)]}``.

    The partner is the reference benchmark the ratio divides by ("" for stored ratio fields).
    """
    ratios: dict[str, list] = {}
    for rule in RATIO_RULES:
        cases = [m for m in run.values() if m.test == rule.test and rule.key in m.params]
        references = {
            _context(m, rule.key): m for m in cases if m.params[rule.key] == rule.reference
        }
        for m in cases:
            reference = references.get(_context(m, rule.key))
            if reference is None or m is reference:
                continue
            value = (
                reference.median / m.median
                if rule.higher_is_better
                else m.median / reference.median
            )
            ratios.setdefault(m.fullname, []).append(
                (rule.name, value, rule.higher_is_better, reference.fullname)
            )
    for m in run.values():
        for field_name, label in RATIO_FIELDS.items():
            value = m.extra_info.get(field_name)
            if isinstance(value, int | float) and value > 0:
                ratios.setdefault(m.fullname, []).append((label, float(value), True, ""))
    return ratios


PEAK_FIELDS = ("peak_bytes", "forward_peak_bytes")
# MEASURE.md: when the host enqueues no faster than the GPU runs, per-call time follows host
# jitter; such a case is reported, never gated on device-time noise.
HOST_BOUND_REASON = "host-bound (host enqueue >= 80 % of device time): its time follows host jitter"


def _peak_bytes(baseline: Measured, current: Measured) -> tuple[int, int] | None:
    for name in PEAK_FIELDS:
        before, now = baseline.extra_info.get(name), current.extra_info.get(name)
        if isinstance(before, int) and isinstance(now, int):
            return before, now
    return None


@dataclass(frozen=True)
class GateInputs:
    """Everything the gate needs about one run besides the measurements."""

    families: dict[str, tuple[str | None, float | None]]  # fullname -> (family, threshold)
    thresholds: Thresholds
    untrusted: str | None = None


def slowest_of(runs: list[dict[str, Measured]]) -> dict[str, Measured]:
    """Per benchmark, its measurement from the run where its median was highest."""
    return _pick(runs, lambda new, kept: new.median >= kept.median)


def fastest_of(runs: list[dict[str, Measured]]) -> dict[str, Measured]:
    """Per benchmark, its measurement from the run where its median was lowest."""
    return _pick(runs, lambda new, kept: new.median < kept.median)


def _pick(runs: list[dict[str, Measured]], replaces) -> dict[str, Measured]:
    kept: dict[str, Measured] = {}
    for run in runs:
        for name, measured in run.items():
            if name not in kept or replaces(measured, kept[name]):
                kept[name] = measured
    return kept


def worst_ratios(runs: list[dict[str, Measured]]) -> dict[str, list[tuple[str, float, bool, str]]]:
    """``same_run_ratios`` over several runs, keeping each ratio's worst value."""
    worst: dict[tuple[str, str], tuple[str, float, bool, str]] = {}
    for run in runs:
        for name, ratios in same_run_ratios(run).items():
            for ratio in ratios:
                label, value, higher_is_better, _ = ratio
                kept = worst.get((name, label))
                if kept is None or (value < kept[1] if higher_is_better else value > kept[1]):
                    worst[(name, label)] = ratio
    by_benchmark: dict[str, list] = {}
    for (name, _), ratio in worst.items():
        by_benchmark.setdefault(name, []).append(ratio)
    return by_benchmark


def pairs_for(
    baselines: list[dict[str, Measured]],
    current: dict[str, Measured],
    inputs: GateInputs,
    confirmation: dict[str, Measured] | None = None,
) -> list[BenchmarkPair]:
    """One ``BenchmarkPair`` per benchmark on either side, with ratios and peak memory, against
    the slowest of the baseline runs (one run, or a set saved under one name)."""
    confirmation = confirmation or {}
    baseline = slowest_of(baselines)
    fastest = fastest_of(baselines) if len(baselines) > 1 else {}
    baseline_ratios = worst_ratios(baselines)
    current_ratios = same_run_ratios(current)
    confirmed_run = {**current, **confirmation}
    confirmed_ratios = same_run_ratios(confirmed_run) if confirmation else {}
    pairs = []
    for name in sorted(set(baseline) | set(current)):
        before, now = baseline.get(name), current.get(name)
        family, threshold = inputs.families.get(name, (None, None))
        ratios, peak = [], None
        if before is not None and now is not None:
            ratios = _ratio_pairs(
                baseline_ratios.get(name, []),
                current_ratios.get(name, []),
                confirmed_ratios.get(name, []),
                threshold,
            )
            peak = _peak_bytes(before, now)
        again = confirmation.get(name)
        host_bound = any(m is not None and m.extra_info.get("host_bound") for m in (before, now))
        counted = before is not None and now is not None
        counted = counted and is_instructions(before.extra_info) and is_instructions(now.extra_info)
        pairs.append(
            BenchmarkPair(
                name=name,
                baseline=before.samples if before else None,
                current=now.samples if now else None,
                family=family,
                confirmation=again.samples if again else None,
                threshold=threshold,
                peak_bytes=peak,
                ratios=ratios,
                untrusted=HOST_BOUND_REASON if host_bound else None,
                fastest_baseline=fastest[name].samples if name in fastest else None,
                baseline_spread=_spread(before, fastest.get(name)),
                counters=(before.extra_info, now.extra_info) if counted else None,
            )
        )
    return pairs


def _spread(slowest: Measured | None, fastest: Measured | None) -> float | None:
    if slowest is None or fastest is None or fastest.median <= 0:
        return None
    return slowest.median / fastest.median - 1.0


def _ratio_pairs(before: list, now: list, again: list, threshold: float | None) -> list[RatioPair]:
    """Ratios on both sides; a test's own threshold marker applies to its ratios too."""
    old = {name: value for name, value, _, _ in before}
    repeat = {name: value for name, value, _, _ in again}
    return [
        RatioPair(name, old[name], value, repeat.get(name), higher_is_better, threshold)
        for name, value, higher_is_better, _ in now
        if name in old
    ]


def rerun_names(results: list[GateResult], current: dict[str, Measured]) -> set[str]:
    """Benchmarks to re-run: each flagged one, plus the references its ratios divide by."""
    flagged = {r.name for r in results if r.verdict is Verdict.UNCONFIRMED}
    partners = {
        partner
        for name in flagged
        for _, _, _, partner in same_run_ratios(current).get(name, [])
        if partner
    }
    return flagged | partners


def run_gate(
    baselines: list[dict[str, Measured]],
    current: dict[str, Measured],
    inputs: GateInputs,
    confirmation: dict[str, Measured] | None = None,
) -> list[GateResult]:
    """Gate ``current`` on the baseline runs (a list of one run or of a set)."""
    pairs = pairs_for(baselines, current, inputs, confirmation)
    return gate_results(pairs, inputs.thresholds, inputs.untrusted)
