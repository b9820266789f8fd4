"""Pairing: each benchmark of the current run with the baseline's, its same-run ratios and its
peak memory, against a baseline that may be a set of runs.

Same-run ratios are declared on the tests (``@pytest.mark.perfgate(ratios=[Ratio(...)])``) and
saved with each benchmark, so a saved run carries its own rules. Against a set, each benchmark is
compared with the set's slowest run of it and each ratio with its worst value in the set: how far
a machine's own sessions differ (large on a shared CPU VM, docs/NOTES.md) is never a regression.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from perfgate.benchmark import Benchmark, Run
from perfgate.fields import Declared, Field, Ratio

__all__ = ["Ratio", "RatioValue"]  # Ratio is declared by the tests: it lives in the model


@dataclass(frozen=True)
class RatioValue:
    """One ratio of one benchmark in one run; ``partner`` is the reference benchmark ("" for a
    stored field)."""

    name: str
    value: float
    higher_is_better: bool
    partner: str


def declarations_of(*runs: Run) -> dict[str, dict]:
    """Each benchmark's declarations, from the first run that has them (runs saved before the
    tests declared anything borrow the current run's)."""
    found: dict[str, dict] = {}
    for run in runs:
        for name, benchmark in run.benchmarks.items():
            if benchmark.declarations and name not in found:
                found[name] = benchmark.declarations
    return found


def _context(benchmark: Benchmark, key: str) -> str:
    others = {k: v for k, v in benchmark.params.items() if k != key}
    return json.dumps([benchmark.test, others], sort_keys=True, default=str)


def same_run_ratios(run: Run, declared: dict[str, dict]) -> dict[str, list[RatioValue]]:
    """The declared ratios of every benchmark of ``run``, by fullname."""
    ratios: dict[str, list[RatioValue]] = {}
    by_context: dict[tuple[str, str], Benchmark] = {}
    for b in run.benchmarks.values():
        for key, value in b.params.items():
            by_context[(_context(b, key), json.dumps([key, value], default=str))] = b
    for name, benchmark in run.benchmarks.items():
        for spec in declared.get(name, {}).get(Declared.RATIOS, []):
            value = _ratio_value(benchmark, spec, by_context)
            if value is not None:
                ratios.setdefault(name, []).append(value)
    return ratios


def _ratio_value(benchmark: Benchmark, spec: dict, by_context) -> RatioValue | None:
    higher = bool(spec.get("higher_is_better", True))
    if "field" in spec:
        value = benchmark.fact(spec["field"])
        if isinstance(value, int | float) and value > 0:
            return RatioValue(spec["name"], float(value), higher, "")
        return None
    key = spec["key"]
    if key not in benchmark.params or benchmark.params[key] == spec["reference"]:
        return None
    wanted = (_context(benchmark, key), json.dumps([key, spec["reference"]], default=str))
    reference = by_context.get(wanted)
    if reference is None:
        return None
    value = reference.median / benchmark.median if higher else benchmark.median / reference.median
    return RatioValue(spec["name"], value, higher, reference.fullname)


def slowest_of(runs: list[Run]) -> dict[str, Benchmark]:
    """Per benchmark, its measurement from the run where its median was highest."""
    return _pick(runs, lambda new, kept: new.median >= kept.median)


def fastest_of(runs: list[Run]) -> dict[str, Benchmark]:
    """Per benchmark, its measurement from the run where its median was lowest."""
    return _pick(runs, lambda new, kept: new.median < kept.median)


def _pick(runs: list[Run], replaces) -> dict[str, Benchmark]:
    kept: dict[str, Benchmark] = {}
    for run in runs:
        for name, benchmark in run.benchmarks.items():
            if name not in kept or replaces(benchmark, kept[name]):
                kept[name] = benchmark
    return kept


def worst_ratios(runs: list[Run], declared: dict[str, dict]) -> dict[str, dict[str, RatioValue]]:
    """``same_run_ratios`` over several runs, keeping each ratio's worst value."""
    worst: dict[str, dict[str, RatioValue]] = {}
    for run in runs:
        for name, values in same_run_ratios(run, declared).items():
            for ratio in values:
                kept = worst.setdefault(name, {}).get(ratio.name)
                if kept is None or _worse(ratio, kept):
                    worst[name][ratio.name] = ratio
    return worst


def _worse(a: RatioValue, b: RatioValue) -> bool:
    return a.value < b.value if a.higher_is_better else a.value > b.value


PEAK_FIELDS = (Field.PEAK_BYTES, Field.FORWARD_PEAK_BYTES)


def peak_bytes(baseline: Benchmark, current: Benchmark) -> tuple[int, int] | None:
    """(baseline, current) peak memory in bytes, from the first field both sides stored."""
    for name in PEAK_FIELDS:
        before, now = baseline.fact(name), current.fact(name)  # as stored: rules check them
        if isinstance(before, int) and isinstance(now, int):
            return before, now
    return None
