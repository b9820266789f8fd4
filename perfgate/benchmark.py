"""The one model of a benchmark and of a run: what the gate, the CLI and the reports all read.

Built from pytest-benchmark's JSON (a saved run, or the in-memory session turned into the same
JSON), checked once here. Nothing else in perfgate reads a benchmark as a raw dict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from perfgate.stats import median


class RunFormatError(Exception):
    """A run (file or session) that is not a usable pytest-benchmark run; says where and why."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of one run. ``samples`` are per-round seconds per call (may be empty when
    the run was saved without per-round data); ``extra_info`` holds what the test recorded."""

    fullname: str
    name: str
    group: str | None = None
    params: dict = field(default_factory=dict)
    samples: tuple[float, ...] = ()
    extra_info: dict = field(default_factory=dict)
    stored_median: float | None = None  # the JSON's stats.median: used only without samples

    @property
    def test(self) -> str:
        """The test function's name: ``test_attention`` for ``...::test_attention[cuda-...]``."""
        return self.fullname.split("::")[-1].split("[")[0]

    @property
    def median(self) -> float:
        """Median seconds per call: of the samples when there are any, else as stored."""
        if self.samples:
            return median(self.samples)
        return float(self.stored_median)

    @property
    def quartiles(self) -> tuple[float, float] | None:
        """(q1, q3) seconds of the samples; None without samples."""
        if not self.samples:
            return None
        q1, q3 = np.percentile(self.samples, [25, 75])
        return float(q1), float(q3)

    @property
    def declarations(self) -> dict:
        """What the test declared for the gate (family, threshold, ratios), saved with it."""
        return self.extra_info.get("perfgate") or {}

    @property
    def family(self) -> str | None:
        return self.declarations.get("family")


def benchmark_from_json(entry: object, where: str) -> Benchmark:
    """A ``Benchmark`` from one entry of a run's "benchmarks" list; RunFormatError naming
    ``where`` (file and index) when the entry is malformed or its per-round data unusable."""
    if not isinstance(entry, dict):
        raise RunFormatError(f"{where} is not an object")
    fullname, name = entry.get("fullname") or entry.get("name"), entry.get("name")
    stats = entry.get("stats")
    if not isinstance(name, str) or not isinstance(fullname, str) or not isinstance(stats, dict):
        raise RunFormatError(f"{where} has no name, fullname or stats")
    label = f"{where} ({fullname})"
    data = stats.get("data")
    if data is None or data == []:
        samples: tuple[float, ...] = ()
    elif isinstance(data, list) and all(_positive_number(x) for x in data):
        samples = tuple(float(x) for x in data)
    else:
        raise RunFormatError(f"{label}: stats.data must be a list of positive seconds")
    stored = stats.get("median")
    if not samples and not _positive_number(stored):
        raise RunFormatError(f"{label}: neither per-round data nor a positive stats.median")
    params, extra = entry.get("params") or {}, entry.get("extra_info") or {}
    if not isinstance(params, dict) or not isinstance(extra, dict):
        raise RunFormatError(f"{label}: params and extra_info must be objects")
    group = entry.get("group")
    return Benchmark(fullname, name, group, params, samples, extra, _float_or_none(stored))


def _positive_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _float_or_none(value: object) -> float | None:
    return float(value) if _positive_number(value) else None


@dataclass(frozen=True)
class Run:
    """One run: a saved file (``path``) or the session in progress (``path`` None)."""

    path: Path | None
    datetime: str
    machine_info: dict
    commit_info: dict
    benchmarks: dict[str, Benchmark]

    @property
    def perfgate(self) -> dict:
        """What perfgate adds to machine_info: hardware key, software versions, GPU health."""
        return self.machine_info.get("perfgate") or {}

    @property
    def hardware_key(self) -> str:
        key = self.perfgate.get("hardware_key")
        if key:
            return str(key)
        return self.path.parent.parent.name if self.path else "?"

    @property
    def label(self) -> str:
        return self.path.name if self.path else "this run"

    @property
    def name(self) -> str:
        """The name it was saved under: ``cpu-default`` for ``0004_cpu-default.json``."""
        return self.path.stem.partition("_")[2] if self.path else ""

    @property
    def date(self) -> str:
        """'YYYY-MM-DD HH:MM' of the run's datetime ('?' when absent)."""
        return (self.datetime or "?")[:16].replace("T", " ")

    @property
    def commit(self) -> str | None:
        return self.commit_info.get("id") or None

    @cached_property
    def environment(self) -> dict:
        return environment(self.machine_info)

    @property
    def untrusted_reasons(self) -> list[str]:
        health = self.perfgate.get("gpu_health") or {}
        if health.get("trusted", True):
            return []
        return list(health.get("untrusted_reasons") or ["GPU health not trusted"])

    def without_samples(self) -> list[Benchmark]:
        return [b for b in self.benchmarks.values() if not b.samples]


def run_from_json(data: object, path: Path | None) -> Run:
    """A ``Run`` from pytest-benchmark's JSON; RunFormatError naming the file and the entry."""
    where = str(path) if path else "this run"
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise RunFormatError(f"{where} has no 'benchmarks' list: not a pytest-benchmark run")
    benchmarks: dict[str, Benchmark] = {}
    for index, entry in enumerate(data["benchmarks"]):
        benchmark = benchmark_from_json(entry, f"{where}: benchmarks[{index}]")
        benchmarks[benchmark.fullname] = benchmark
    machine_info, commit_info = data.get("machine_info") or {}, data.get("commit_info") or {}
    if not isinstance(machine_info, dict) or not isinstance(commit_info, dict):
        raise RunFormatError(f"{where}: machine_info and commit_info must be objects")
    return Run(path, str(data.get("datetime") or ""), machine_info, commit_info, benchmarks)


def environment(machine_info: dict) -> dict:
    """Software versions (python, torch, cuda, cudnn, triton), the GPU driver, the host
    allocator setting and locked GPU clocks of a run: what can change performance without
    changing hardware."""
    perfgate = machine_info.get("perfgate") or {}
    facts = dict(perfgate.get("software") or {})
    if "host_malloc" in perfgate:
        facts["host malloc"] = perfgate["host_malloc"]
    if perfgate.get("clocks_locked"):  # only when locked: older runs did not record it
        facts["GPU clocks"] = "locked at base"
    driver = (perfgate.get("gpu_health") or {}).get("driver_version")
    if driver:
        facts["driver"] = driver
    return facts


def environment_changes(before: dict, after: dict) -> list[tuple[str, str, str]]:
    """(key, before, after) for each environment entry that differs, sorted by key."""
    keys = sorted(set(before) | set(after))
    return [
        (k, str(before.get(k)), str(after.get(k))) for k in keys if before.get(k) != after.get(k)
    ]


def describe_changes(changes: list[tuple[str, str, str]]) -> str:
    return "; ".join(f"{key} {old} -> {new}" for key, old, new in changes)
