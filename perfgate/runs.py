"""Saved runs for the command line: what a RUN argument names, and what a run holds.

A RUN argument is a path to a pytest-benchmark JSON file, or a run number (``3``, ``0003``) or a
name fragment (``h100-full``) looked up in one hardware folder of the baseline store.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from perfgate.baselines import load_run, saved_runs

SAVE_HINT = "record one with `pytest perf_tests --benchmark-save=NAME`"


class RunError(Exception):
    """A RUN argument that names no usable run; the message says what to do instead."""


@dataclass(frozen=True)
class Run:
    """One saved run: its file and its parsed pytest-benchmark JSON."""

    path: Path
    data: dict

    @property
    def perfgate(self) -> dict:
        return self.data.get("machine_info", {}).get("perfgate", {})

    @property
    def hardware_key(self) -> str:
        return self.perfgate.get("hardware_key") or self.path.parent.name

    @property
    def date(self) -> str:
        """'YYYY-MM-DD HH:MM' from the run's ISO datetime ('?' when absent)."""
        stamp = str(self.data.get("datetime") or "?")
        return stamp[:16].replace("T", " ")

    @cached_property
    def benchmarks(self) -> dict[str, dict]:
        """Benchmarks by fullname, in the run's order."""
        return {b.get("fullname") or b["name"]: b for b in self.data["benchmarks"]}

    @property
    def environment(self) -> dict:
        return environment(self.data.get("machine_info", {}))

    @property
    def untrusted_reasons(self) -> list[str]:
        health = self.perfgate.get("gpu_health", {})
        if health.get("trusted", True):
            return []
        return list(health.get("untrusted_reasons") or ["GPU health not trusted"])


def environment(machine_info: dict) -> dict:
    """Software versions (python, torch, cuda, cudnn, triton), the GPU driver and the host
    allocator setting of a run."""
    perfgate = machine_info.get("perfgate", {})
    facts = dict(perfgate.get("software", {}))
    if "host_malloc" in perfgate:
        facts["host malloc"] = perfgate["host_malloc"]
    driver = perfgate.get("gpu_health", {}).get("driver_version")
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


def samples(benchmark: dict) -> list[float]:
    """Per-round seconds per iteration (pytest-benchmark's stats.data), [] when not saved."""
    return list(benchmark.get("stats", {}).get("data") or [])


def median(benchmark: dict) -> float:
    """Median seconds per call of a benchmark."""
    return float(benchmark["stats"]["median"])


def matches(benchmark: dict, patterns: Sequence[str]) -> bool:
    """True when any pattern matches the name or fullname: a glob, else a substring (any case)."""
    names = [benchmark.get("name", ""), benchmark.get("fullname", "")]
    for pattern in patterns:
        for name in names:
            if fnmatch.fnmatchcase(name, pattern) or pattern.lower() in name.lower():
                return True
    return False


def default_baselines_root() -> Path:
    """The nearest ``baselines/`` folder from the working directory up, else the repository's."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "baselines").is_dir():
            return folder / "baselines"
    return Path(__file__).resolve().parents[1] / "baselines"


def this_hardware_key() -> str:
    """This machine's hardware key (imports torch, so only called when a key is needed)."""
    import torch

    from perfgate.hardware import hardware_key

    return hardware_key(use_cuda=torch.cuda.is_available())


def _no_runs(folder: Path) -> RunError:
    root = folder.parent
    keys = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    others = f" (available: {', '.join(keys)})" if keys else ""
    return RunError(
        f"no saved runs in {folder}; {SAVE_HINT}, pick another hardware folder with "
        f"--hardware KEY{others} or --baselines DIR, or pass a run file's path"
    )


def folder_runs(folder: Path) -> list[Path]:
    """Saved runs of a hardware folder, oldest first; RunError when there are none."""
    runs = saved_runs(folder)
    if not runs:
        raise _no_runs(folder)
    return runs


def _names_run(path: Path, argument: str) -> bool:
    if argument.isdigit():
        return path.name[:4].isdigit() and int(path.name[:4]) == int(argument)
    return argument.lower() in path.stem.lower()


def resolve(argument: str, folder: Path) -> Path:
    """The run file a RUN argument names: an existing path, or one saved run in ``folder``."""
    path = Path(argument)
    if path.is_file():
        return path
    if path.suffix == ".json" or os.sep in argument:
        raise RunError(
            f"run file {path} does not exist; pass an existing pytest-benchmark JSON file, or a "
            f"run number such as 0001 from {folder} (`ls -R {folder}` lists them)"
        )
    runs = folder_runs(folder)
    hits = [run for run in runs if _names_run(run, argument)]
    if len(hits) == 1:
        return hits[0]
    listing = ", ".join(str(run.relative_to(folder)) for run in (hits or runs))
    if hits:
        raise RunError(f"'{argument}' names several runs in {folder}: {listing}; be more specific")
    raise RunError(f"no run '{argument}' in {folder}; saved runs there: {listing}")


def read(path: Path) -> Run:
    """Load a run file: BaselineError when it is unreadable, RunError when a benchmark lacks
    the name or median every command needs (both name the file)."""
    data = load_run(Path(path))
    for number, benchmark in enumerate(data["benchmarks"]):
        stats = benchmark.get("stats") if isinstance(benchmark, dict) else None
        if not isinstance(stats, dict) or "name" not in benchmark or "median" not in stats:
            raise RunError(
                f"run {path}: benchmarks[{number}] has no name or no stats.median; not a "
                "pytest-benchmark run file, or a damaged one (restore it from git)"
            )
    return Run(Path(path), data)
