"""The one model of a benchmark and of a run: what the gate, the CLI and the reports all read.

Built from pytest-benchmark's JSON (a saved run, or the in-memory session turned into the same
JSON), checked once here. Nothing else in perfgate reads a benchmark as a raw dict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from perfgate.stats import BOOTSTRAP_POINTS, median

# Per-round data a run keeps per benchmark: at most this many rounds, evenly spaced in the order
# they were measured (so the noise blocks of verdict.noise stay in order). The verdict's
# bootstrap resamples no more than this many a side anyway; the stats pytest-benchmark computes
# (min, max, mean, stddev, median, iqr, rounds, ...) stay those of every round measured.
KEPT_ROUNDS = BOOTSTRAP_POINTS
UNVERSIONED = "unversioned"  # pytest-benchmark's commit_info.id of a run saved outside git
ROUNDS_KEPT = "rounds_kept"  # stats field: how many of stats.rounds are in stats.data, if fewer


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
    measured_rounds: int | None = None  # the JSON's stats.rounds, when more than the samples

    @property
    def rounds(self) -> int:
        """Rounds measured: every round pytest-benchmark timed, kept in ``samples`` or not."""
        return max(self.measured_rounds or 0, len(self.samples))

    @property
    def group_label(self) -> str:
        """pytest-benchmark's group, or "" for a benchmark in none."""
        return "" if self.group is None else str(self.group)

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
    data = kept(data) if isinstance(data, list) else data  # an older run's every round: bounded
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
    group, rounds = entry.get("group"), stats.get("rounds")
    rounds = rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None
    return Benchmark(fullname, name, group, params, samples, extra, _float_or_none(stored), rounds)


def kept(data: list) -> list:
    """At most ``KEPT_ROUNDS`` of ``data``, evenly spaced in order, first and last included."""
    if len(data) <= KEPT_ROUNDS:
        return data
    step = (len(data) - 1) / (KEPT_ROUNDS - 1)
    return [data[round(i * step)] for i in range(KEPT_ROUNDS)]


def with_rounds_kept(entry: dict) -> dict:
    """A copy of one benchmark entry of a run's JSON whose ``stats.data`` holds only the kept
    rounds, with ``stats.rounds_kept`` saying how many when that is fewer than ``stats.rounds``;
    every other field (the exact statistics of every round) as it was."""
    stats = entry.get("stats")
    data = stats.get("data") if isinstance(stats, dict) else None
    if not isinstance(data, list) or len(data) <= KEPT_ROUNDS:
        return entry
    return {**entry, "stats": {**stats, "data": kept(data), ROUNDS_KEPT: KEPT_ROUNDS}}


def with_bounded_data(run_json: dict) -> dict:
    """A copy of a run's JSON, each benchmark's per-round data bounded (``with_rounds_kept``)."""
    benchmarks = run_json.get("benchmarks")
    if not isinstance(benchmarks, list):
        return run_json
    return {**run_json, "benchmarks": [_bounded(entry) for entry in benchmarks]}


def _bounded(entry: object) -> object:
    return with_rounds_kept(entry) if isinstance(entry, dict) else entry


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
        """The commit the run measured; None when unknown (saved outside a git repository)."""
        commit = self.commit_info.get("id")
        return None if not commit or commit == UNVERSIONED else str(commit)

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
    """(key, before, after) for each environment entry that differs, sorted by key; none when
    a run recorded no environment (saved by pytest-benchmark alone: unknown, not changed)."""
    if not before or not after:
        return []
    keys = sorted(set(before) | set(after))
    return [
        (k, str(before.get(k)), str(after.get(k))) for k in keys if before.get(k) != after.get(k)
    ]


def describe_changes(changes: list[tuple[str, str, str]]) -> str:
    return "; ".join(f"{key} {old} -> {new}" for key, old, new in changes)


@dataclass(frozen=True)
class Ratio:
    """A same-run ratio declared on a test, for the gate.

    Either a ratio to a reference case of the same test: ``key`` names the parameter that differs
    and ``reference`` its value in the reference case (``Ratio("speedup over naive",
    key="implementation", reference="naive")``); with ``higher_is_better`` the ratio is
    reference / this (a speedup), else this / reference (a relative latency). Or an ``extra_info``
    field the test stores that already is a ratio (``Ratio("fraction of copy", field=...)``).
    """

    name: str
    key: str | None = None
    reference: object = None
    field: str | None = None
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if (self.key is None) == (self.field is None):
            raise ValueError(f"Ratio {self.name!r}: give either key and reference, or field")

    def as_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}
