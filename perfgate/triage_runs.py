"""Saved runs for the triage tools (dashboard, change points), one list per hardware key.

The triage modules read runs through the duck-typed model of ``perfgate.benchmark``:
Run (.path, .datetime, .commit, .commit_info, .machine_info, .environment, .hardware_key,
.benchmarks) and Benchmark (.fullname, .name, .group, .params, .samples, .median,
.extra_info). ``as_run`` builds that model from today's ``perfgate.runs.Run``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace

from perfgate import runs as raw_runs
from perfgate.baselines import saved_runs


# shim: replaced when merged (the lead's perfgate.benchmark loader builds these objects)
def as_run(run: raw_runs.Run) -> SimpleNamespace:
    """The Run/Benchmark interface of ``perfgate.benchmark`` over a ``perfgate.runs.Run``."""
    info = run.data.get("commit_info") or {}
    benchmarks = {
        fullname: SimpleNamespace(
            fullname=fullname,
            name=b["name"],
            group=b.get("group"),
            params=b.get("params") or {},
            samples=tuple(raw_runs.samples(b)),
            median=raw_runs.median(b),
            extra_info=b.get("extra_info") or {},
        )
        for fullname, b in run.benchmarks.items()
    }
    return SimpleNamespace(
        path=run.path,
        datetime=str(run.data.get("datetime") or ""),
        commit=info.get("id"),
        commit_info=info,
        machine_info=run.data.get("machine_info") or {},
        environment=run.environment,
        hardware_key=run.hardware_key,
        benchmarks=benchmarks,
    )


def load(path: Path):
    """One run file as a Run (BaselineError/RunError name the file when it is unusable)."""
    return as_run(raw_runs.read(Path(path)))


def hardware_folders(root: Path) -> list[Path]:
    """Every hardware folder under a baseline root that holds saved runs, by name."""
    if not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir() if p.is_dir() and saved_runs(p))


def runs_by_hardware(root: Path, extra: Iterable[Path] = ()) -> dict[str, list]:
    """The saved runs of every hardware folder under ``root`` plus the ``extra`` run files,
    grouped by hardware key, each list oldest first (saved order, then extras by datetime)."""
    grouped: dict[str, list] = {}
    saved = [
        (folder.name, path) for folder in hardware_folders(root) for path in saved_runs(folder)
    ]
    for key, path in saved:
        grouped.setdefault(key, []).append(load(path))
    known = {path.resolve() for _, path in saved}
    given = {Path(path).resolve(): Path(path) for path in extra}  # each file once
    for run in sorted((load(p) for r, p in given.items() if r not in known), key=_when):
        grouped.setdefault(run.hardware_key, []).append(run)
    return grouped


def _when(run) -> str:
    return run.datetime


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
