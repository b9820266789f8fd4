"""The one model of a benchmark and of a run: what the gate, the CLI and the reports all read.

Built from pytest-benchmark's JSON (a saved run, or the in-memory session turned into the same
JSON), checked once here. Nothing else in perfgate reads a benchmark as a raw dict: the fields
perfgate stores are named in ``Field`` (``perfgate.fields``) and read through the typed accessors
of ``Benchmark`` below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from perfgate.environment import describe_changes as describe_changes  # re-exported
from perfgate.environment import environment
from perfgate.environment import environment_changes as environment_changes  # re-exported
from perfgate.fields import Clock, Declared, Field, RunField, StoredFields, kept
from perfgate.stats import median

UNVERSIONED = "unversioned"  # pytest-benchmark's commit_info.id of a run saved outside git


class RunFormatError(Exception):
    """A run (file or session) that is not a usable pytest-benchmark run; says where and why."""


@dataclass(frozen=True)
class Benchmark(StoredFields):
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
    run_gpu: dict | None = None  # the GPU its run recorded (machine_info.perfgate.gpu)

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
        return self.record(Field.DECLARATIONS) or {}

    @property
    def family(self) -> str | None:
        return self.declarations.get(Declared.FAMILY)

    @property
    def clock(self) -> str | None:
        """How the rounds were timed (a ``Clock`` value); None when not recorded."""
        return self.extra_info.get(Field.CLOCK)

    @property
    def device_timed(self) -> bool:
        """Timed as a kernel's GPU time (a CUDA graph over rotating buffers)."""
        return self.clock == Clock.DEVICE

    @property
    def device_seconds(self) -> float | None:
        """Device seconds per call (do_bench); None off CUDA."""
        return self.number(Field.DEVICE_S)

    @property
    def host_bound(self) -> bool:
        """The host's enqueue took most of the device time: the host limits the case."""
        return bool(self.extra_info.get(Field.HOST_BOUND))

    @property
    def code_path(self) -> str | None:
        return self.extra_info.get(Field.CODE_PATH)

    @property
    def counted(self) -> bool:
        """A counted case (CPU instructions per call), not a timed one."""
        return self.extra_info.get(Field.MEASURE) == Field.INSTRUCTIONS

    @property
    def instructions(self) -> float | None:
        """CPU instructions per call; None for a timed case."""
        return self.number(Field.INSTRUCTIONS)

    @property
    def counters(self) -> dict | None:
        """Exact counts per call (Python calls, ATen operators, graphs); None when not counted."""
        return self.record(Field.COUNTERS)

    @property
    def launch_counts(self) -> dict | None:
        return self.record(Field.LAUNCH_COUNTS)

    @property
    def profile(self) -> dict | None:
        """The compact per-kernel record of a profiled case; None when not profiled."""
        return self.record(Field.PROFILE)

    @property
    def peak_bytes(self) -> int | None:
        """Peak memory of a call, else of a forward pass (bytes); None when not measured."""
        for name in (Field.PEAK_BYTES, Field.FORWARD_PEAK_BYTES):
            if isinstance(value := self.number(name), int):
                return value
        return None

    @property
    def reduced_clock_rounds(self) -> int:
        """Rounds read below fields.REDUCED_CLOCK_FRACTION of the highest SM clock."""
        return int(self.number(Field.REDUCED_CLOCK_ROUNDS) or 0)

    @property
    def gpu(self) -> dict | None:
        """The GPU that timed the case: its own (a pytest-xdist worker's, in a merged run), else
        its run's; None when neither recorded one (the CPU, or an older run)."""
        return self.record(Field.GPU) or self.run_gpu


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


def _positive_number(value: object) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


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
        return self.machine_info.get(RunField.PERFGATE) or {}

    @property
    def hardware_key(self) -> str:
        key = self.recorded_key
        if key:
            return str(key)
        return self.path.parent.parent.name if self.path else "?"

    @property
    def format(self) -> int:
        """The run format of the perfgate that wrote it (0: older, or pytest-benchmark alone)."""
        value = self.perfgate.get(RunField.FORMAT, 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def recorded_key(self) -> str | None:
        """The hardware key the run recorded; None for a run saved by pytest-benchmark alone."""
        return self.perfgate.get(RunField.HARDWARE_KEY) or None

    @property
    def gpu_health(self) -> dict:
        return self.perfgate.get(RunField.GPU_HEALTH) or {}

    @property
    def tier(self) -> str | None:
        return self.perfgate.get(RunField.TIER)

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
        health = self.gpu_health
        if health.get("trusted", True):
            return []
        return list(health.get("untrusted_reasons") or ["GPU health not trusted"])

    @property
    def other_processes(self) -> list[str]:
        """'pid N (M MiB)' of each other process the GPU ran when the run started."""
        return [str(p) for p in self.gpu_health.get("other_processes") or []]

    @property
    def counted(self) -> bool:
        """A run of counted cases (``--perf-measure instructions``), not of timed ones."""
        return any(b.counted for b in self.benchmarks.values())

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
    ours = machine_info.get(RunField.PERFGATE)
    gpu = ours.get(RunField.GPU) if isinstance(ours, dict) else None
    if isinstance(gpu, dict):
        benchmarks = {name: replace(b, run_gpu=gpu) for name, b in benchmarks.items()}
    return Run(path, str(data.get("datetime") or ""), machine_info, commit_info, benchmarks)
