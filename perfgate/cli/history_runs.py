"""Saved runs for the triage tools (dashboard, bisect, change points), one list per hardware key,
read through ``perfgate.store`` as ``perfgate.benchmark.Run`` objects."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from perfgate import store
from perfgate.benchmark import Run
from perfgate.store import schema as run_schema


def load(path: Path) -> Run:
    """One run file (StoreError names the file when it is unusable)."""
    return store.load(Path(path))


def hardware_folders(root: Path) -> list[Path]:
    """Every hardware folder under a baseline root that holds saved runs, by name."""
    if not Path(root).is_dir():
        return []
    return [Path(root) / key for key in store.hardware_keys(Path(root))]


def runs_by_hardware(root: Path, extra: Iterable[Path] = ()) -> dict[str, list]:
    """The saved runs of every hardware folder under ``root`` plus the ``extra`` run files,
    grouped by hardware key, each list oldest first by recorded datetime (a run file given
    may be older than the newest saved run: an A/A series, a night's run promoted later)."""
    grouped: dict[str, list] = {}
    saved = [
        (folder.name, run) for folder in hardware_folders(root) for run in store.saved_runs(folder)
    ]
    for key, run in saved:
        grouped.setdefault(key, []).append(run)
    known = {os.path.realpath(run.path) for _, run in saved}
    given = {os.path.realpath(path): Path(path) for path in extra}  # each file once
    for run in (load(p) for r, p in given.items() if r not in known):
        grouped.setdefault(run.hardware_key, []).append(run)
    return {key: sorted(runs, key=_when) for key, runs in grouped.items()}


def _when(run):
    return run_schema.recorded_at(run)
