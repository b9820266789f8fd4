"""Saved runs for the triage tools (dashboard, change points), one list per hardware key,
read through ``perfgate.store`` as ``perfgate.benchmark.Run`` objects."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    known = {run.path.resolve() for _, run in saved}
    given = {Path(path).resolve(): Path(path) for path in extra}  # each file once
    for run in (load(p) for r, p in given.items() if r not in known):
        grouped.setdefault(run.hardware_key, []).append(run)
    return {key: sorted(runs, key=_when) for key, runs in grouped.items()}


def _when(run):
    return run_schema.recorded_at(run)


def run_label(run) -> str:
    """'0003 11-22 06:44' for a saved run, else the file stem and date."""
    stem = Path(run.path).stem
    short = stem[:4] if stem[:4].isdigit() else stem[:16]
    return f"{short} {run.datetime[5:16].replace('T', ' ')}".strip()


def short_commit(run) -> str:
    return (run.commit or "?")[:8]


def benchmark_names(runs: Sequence) -> list[str]:
    """Fullnames measured in any run, in first-seen order."""
    seen: dict[str, None] = {}
    for run in runs:
        for fullname in run.benchmarks:
            seen.setdefault(fullname)
    return list(seen)
