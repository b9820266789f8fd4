"""Profiling instead of timing: with ``--perf-profile DIR`` (or when the gate profiles what it
confirmed), each case runs a few calls under torch.profiler and writes its operator table and a
Chrome trace instead of being timed."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch

from perfgate import _pytest_benchmark

PROFILED_CALLS = 5

_profile_dir: Path | None = None  # set by --perf-profile: profile each case instead of timing it


def active() -> bool:
    return _profile_dir is not None


def set_profile_dir(path: Path | None) -> None:
    """Profile every benchmark case into ``path`` instead of timing it (None: time again)."""
    global _profile_dir
    _profile_dir = None if path is None else Path(path)


def profile_calls(
    benchmark, fn: Callable[[], object], device: torch.device, calls: int = PROFILED_CALLS
) -> dict:
    """Run ``fn`` under torch.profiler after one warm-up call; write the top-20 operator table
    (by self device time on CUDA, self CPU time on the CPU) and a Chrome trace."""
    fn()
    _synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(calls):
            fn()
        _synchronize(device)
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profile.key_averages().table(sort_by=sort_by, row_limit=20)
    _profile_dir.mkdir(parents=True, exist_ok=True)
    stem = _profile_dir / re.sub(r"[^A-Za-z0-9._-]", "_", benchmark.name)
    Path(f"{stem}.txt").write_text(f"{benchmark.fullname}: {calls} calls\n{table}\n")
    profile.export_chrome_trace(f"{stem}.trace.json")
    _pytest_benchmark.mark_profiled(benchmark)
    return {"clock": "profiled", "profile": f"{stem}.txt"}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
