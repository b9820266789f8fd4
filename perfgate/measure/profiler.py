"""Profiles of benchmark cases by torch.profiler, always *instead of* timing them:

- ``--perf-profile DIR``, and the gate for what it confirmed: each case runs a few calls under
  the profiler and writes its operator table and a Chrome trace to DIR;
- runs that are saved (a baseline to be; ``--perf-store-profiles``): after the whole session,
  each timed case runs once more under the profiler (``session.reruns.store_profiles``) and its
  compact profile is stored in its ``extra_info["profile"]``, so a later regression can be
  attributed kernel by kernel. Never between timings: a CUDA profiler session leaves CUPTI
  attached, which slows every later kernel launch of the process (pytorch/pytorch#144455).

A compact profile (``compact``) holds, per call, the self time of the largest kernels (device
time on CUDA, operator CPU time on the CPU) and the bytes allocated under each operator; every
profiled case leaves one in its session's ``Mode.profiles``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate import _pytest_benchmark
from perfgate.fields import PROFILE_ROWS, Clock, Field, Profile
from perfgate.measure.mode import Mode

if TYPE_CHECKING:  # torch is imported where a case is profiled, never by the gate's session
    import torch

PROFILED_CALLS = 5
NAME_LENGTH = 160  # kernel names are cut here (C++ template names run to kilobytes)


def skip(benchmark) -> None:
    """A case not profiled while profiling (a fresh compile per round): no result, no warning."""
    _pytest_benchmark.mark_not_timed(benchmark)


def instead_of_timing(benchmark, fn: Callable[[], object], device: torch.device, mode: Mode):
    """For a case measure.timing times: known as profilable; while the session profiles, profiled
    instead of timed (its facts for ``extra_info``), else None (time it)."""
    mode.profilable.add(benchmark.fullname)
    return profile_calls(benchmark, fn, device, mode) if mode.profiling() else None


def profile_calls(
    benchmark,
    fn: Callable[[], object],
    device: torch.device,
    mode: Mode,
    calls: int = PROFILED_CALLS,
) -> dict:
    """Profile ``fn`` instead of timing it: keep its compact profile in ``mode.profiles``; with
    a profile folder (``mode.profile_dir``), also write the top-20 operator table (by self
    device time on CUDA, self CPU time on the CPU) and a Chrome trace there."""
    profile = run_profiler(fn, device, calls)
    mode.profiles[benchmark.fullname] = compact(profile.events(), device, calls)
    _pytest_benchmark.mark_not_timed(benchmark)
    folder = mode.profile_dir
    if folder is None:
        return {Field.CLOCK: Clock.PROFILED}
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profile.key_averages().table(sort_by=sort_by, row_limit=20)
    stem = file_stem(folder, benchmark)
    Path(f"{stem}.txt").write_text(f"{benchmark.fullname}: {calls} calls\n{table}\n")
    profile.export_chrome_trace(f"{stem}.trace.json")
    return {Field.CLOCK: Clock.PROFILED, Field.PROFILE: f"{stem}.txt"}


def file_stem(folder: Path, benchmark) -> Path:
    """Where a case's profile files go: ``folder`` (made) / its test name as a file name."""
    folder.mkdir(parents=True, exist_ok=True)
    return folder / re.sub(r"[^A-Za-z0-9._-]", "_", benchmark.name)


def run_profiler(fn: Callable[[], object], device: torch.device, calls: int):
    """``calls`` calls of ``fn`` under torch.profiler (memory included), after one warm-up."""
    import torch

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
    from torch.autograd import DeviceType

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
        Profile.CLOCK: "device" if on_cuda else "cpu",
        "calls": calls,
        Profile.TIME_US: _largest(times, calls, 3),
        Profile.ALLOCATED_BYTES: _largest(allocated, calls, 0),
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
        import torch

        torch.cuda.synchronize(device)
