"""The baseline store: one folder of pytest-benchmark JSON per hardware key, under baselines/.

pytest-benchmark's own layout is kept inside each folder (``<machine id>/NNNN_name.json``), so its
tools still read the files. Saving always takes the next number: nothing saved is overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DEFAULT_STORAGE = "file://./.benchmarks"  # pytest-benchmark's default --benchmark-storage


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and what to do."""


def add_options(group) -> None:
    group.addoption(
        "--perf-baselines",
        default=None,
        help="root of the per-hardware baseline folders (default: <rootdir>/baselines)",
    )


def baseline_folder(config: pytest.Config, key: str) -> Path:
    root = config.getoption("--perf-baselines") or Path(config.rootpath) / "baselines"
    return Path(root) / key


def configure_storage(config: pytest.Config, key: str) -> None:
    """Point pytest-benchmark at this hardware's folder and resolve --benchmark-compare.

    An explicit --benchmark-storage wins. A bare --benchmark-compare becomes the newest run of
    this hardware; with none, one line says how to record one and the comparison is dropped, so
    the run (``--benchmark-compare-fail`` included) still succeeds.
    """
    if not hasattr(config.option, "benchmark_storage"):
        return  # pytest-benchmark is not active (-p no:benchmark)
    # per-round samples in every saved run, so the gate can recompute statistics later
    config.option.benchmark_save_data = True
    if config.option.benchmark_storage != DEFAULT_STORAGE:
        return
    folder = baseline_folder(config, key)
    config.option.benchmark_storage = f"file://{folder}"
    if config.option.benchmark_compare is not True:
        return
    newest = newest_run(folder)
    if newest is None:
        _say(
            config,
            f"perfgate: no baseline for this hardware ({key}) in {folder}; record one with "
            "`pytest perf_tests --benchmark-save=baseline` (nothing is compared this run)",
        )
        config.option.benchmark_compare = []
        config.option.benchmark_compare_fail = []
        return
    try:
        load_run(newest)  # a corrupt newest baseline is an error that names the file
    except BaselineError as error:
        raise pytest.UsageError(str(error)) from error
    config.option.benchmark_compare = str(newest)


def saved_runs(folder: Path) -> list[Path]:
    """Saved runs in a hardware folder, oldest first (by run number, then name)."""
    if not folder.is_dir():
        return []
    return sorted(folder.rglob("[0-9][0-9][0-9][0-9]_*.json"), key=lambda p: (p.name, str(p)))


def newest_run(folder: Path) -> Path | None:
    runs = saved_runs(folder)
    return runs[-1] if runs else None


MAX_SET_RUNS = 5


def run_name(path: Path) -> str:
    """The name a run was saved under: ``cpu-default`` for ``0004_cpu-default.json``."""
    return Path(path).stem.partition("_")[2]


def baseline_set(path: Path, environment_of, load=None) -> list[Path]:
    """``path`` and the runs saved just before it under the same name, in the same environment
    (``environment_of(run)`` equal), oldest first, at most MAX_SET_RUNS.

    Saving a baseline several times in a row (``--benchmark-save=cpu-default`` three times) makes
    a set, from which the gate learns how much the machine's sessions differ; another name, or
    a run in another environment, ends the set. ``load`` reads a run (default ``load_run``; pass
    a cached one to read each file once).
    """
    load = load or load_run
    path = Path(path)
    newest = load(path)
    earlier = [p for p in saved_runs(path.parent) if p.name < path.name]
    members = [path]
    for candidate in reversed(earlier):
        if len(members) == MAX_SET_RUNS or run_name(candidate) != run_name(path):
            break
        if environment_of(load(candidate)) != environment_of(newest):
            break
        members.insert(0, candidate)
    return members


def load_run(path: Path) -> dict:
    """Read a pytest-benchmark JSON run, or raise BaselineError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise BaselineError(f"cannot read baseline {path}: {error.strerror}") from error
    try:
        run = json.loads(text)
    except json.JSONDecodeError as error:
        raise BaselineError(
            f"baseline {path} is not valid JSON ({error.msg} at line {error.lineno}); it may be "
            f"truncated: restore it from git (`git checkout -- {path}`) or move it away"
        ) from error
    if not isinstance(run, dict) or not isinstance(run.get("benchmarks"), list):
        raise BaselineError(
            f"baseline {path} has no 'benchmarks' list: not a pytest-benchmark run file"
        )
    return run


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, yellow=True)
    else:
        print(line)
