"""Profiles of benchmark cases, by torch.profiler, in two uses:

- instead of timing: with ``--perf-profile DIR`` (or when the gate profiles what it confirmed),
  each case runs a few calls under the profiler and writes its operator table and a Chrome trace
  to DIR; its compact profile is kept in ``collected`` for the gate's attribution;
- beside timing: in a run that is saved (a baseline to be; ``--perf-store-profiles``), each
  timed case is profiled after its timing and the compact profile stored in
  ``extra_info["profile"]``, so a later regression is attributed kernel by kernel against it.

A compact profile (``compact``) holds, per call, the self time of the largest kernels (device
time on CUDA, operator CPU time on the CPU) and the bytes allocated under each operator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType

from perfgate import _pytest_benchmark

PROFILED_CALLS = 5
PROFILE_ROWS = 15  # kernels and allocation sites kept per case
NAME_LENGTH = 160  # kernel names are cut here (C++ template names run to kilobytes)

_profile_dir: Path | None = None  # set by --perf-profile: profile each case instead of timing it
_store_profiles = False  # set for runs that are saved: profile each timed case after timing it
collected: dict[str, dict] = {}  # fullname -> compact profile of each case profiled instead


def active() -> bool:
    return _profile_dir is not None


def set_profile_dir(path: Path | None) -> None:
    """Profile every benchmark case into ``path`` instead of timing it (None: time again)."""
    global _profile_dir
    _profile_dir = None if path is None else Path(path)


def storing() -> bool:
    return _store_profiles


def set_store_profiles(on: bool) -> None:
    """Store a compact profile with every timed case (runs that are saved as baselines)."""
    global _store_profiles
    _store_profiles = on


def profile_calls(
    benchmark, fn: Callable[[], object], device: torch.device, calls: int = PROFILED_CALLS
) -> dict:
    """Profile ``fn`` instead of timing it: write the top-20 operator table (by self device
    time on CUDA, self CPU time on the CPU) and a Chrome trace; keep the compact profile."""
    profile = _profile(fn, device, calls)
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profile.key_averages().table(sort_by=sort_by, row_limit=20)
    _profile_dir.mkdir(parents=True, exist_ok=True)
    stem = _profile_dir / re.sub(r"[^A-Za-z0-9._-]", "_", benchmark.name)
    Path(f"{stem}.txt").write_text(f"{benchmark.fullname}: {calls} calls\n{table}\n")
    profile.export_chrome_trace(f"{stem}.trace.json")
    collected[benchmark.fullname] = compact(profile.events(), device, calls)
    _pytest_benchmark.mark_profiled(benchmark)
    return {"clock": "profiled", "profile": f"{stem}.txt"}


def stored_profile(fn: Callable[[], object], device: torch.device) -> dict:
    """The compact profile of ``fn``, to store beside its timing."""
    return compact(_profile(fn, device, PROFILED_CALLS).events(), device, PROFILED_CALLS)


def _profile(fn: Callable[[], object], device: torch.device, calls: int):
    """``calls`` calls of ``fn`` under torch.profiler (memory included), after one warm-up."""
    fn()
    _synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities, profile_memory=True) as profile:
        for _ in range(calls):
            fn()
        _synchronize(device)
    return profile


def compact(events, device: torch.device, calls: int) -> dict:
    """Per call: self time of each kernel (CUDA) or operator (CPU), in microseconds, and the
    bytes allocated under each top-level operator; the PROFILE_ROWS largest of each."""
    on_cuda = device.type == "cuda"
    times: dict[str, float] = {}
    allocated: dict[str, float] = {}
    for event in events:
        if on_cuda and event.device_type == DeviceType.CUDA:
            _add(times, event.name, event.time_range.elapsed_us())
        elif not on_cuda and event.device_type == DeviceType.CPU:
            _add(times, event.name, event.self_cpu_time_total)
        nbytes = event.self_device_memory_usage if on_cuda else event.self_cpu_memory_usage
        if nbytes > 0:
            _add(allocated, allocation_site(event), nbytes)
    return {
        "clock": "device" if on_cuda else "cpu",
        "calls": calls,
        "time_us": _largest(times, calls, 3),
        "allocated_bytes": _largest(allocated, calls, 0),
    }


def allocation_site(event) -> str:
    """'aten::linear > aten::empty': the top-level operator an allocation happened under, and
    the one that made it (allocations outside any operator read '[memory]')."""
    top = event
    while top.cpu_parent is not None:
        top = top.cpu_parent
    return event.name if top is event else f"{top.name} > {event.name}"


def _add(values: dict[str, float], name: str, value: float) -> None:
    name = name[:NAME_LENGTH]
    values[name] = values.get(name, 0.0) + value


def _largest(values: dict[str, float], calls: int, digits: int) -> list[list]:
    rows = sorted(values.items(), key=lambda item: -item[1])[:PROFILE_ROWS]
    return [[name, round(total / calls, digits)] for name, total in rows]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
