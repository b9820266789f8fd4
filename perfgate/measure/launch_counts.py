"""Exact launch counts of a CUDA case timed by wall time: per call, the kernels the host
launched, the CUDA graphs it launched and the nodes (kernels, copies) those graphs ran. A
host-bound case's time follows host jitter, these counts do not, so the gate judges such a case
on them (``perfgate/verdict/launches.py``) and shows its time.

The counts come from the profiler (CUPTI), and a CUDA profiler session leaves CUPTI attached,
which slows every later launch of the process (pytorch/pytorch#144455). So a case is never
counted between timings: after the main loop, and after the gate's confirmation re-runs, the
countable cases run once more in counting mode (``session.reruns.count_launches``), as profiles
are stored.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate import _pytest_benchmark
from perfgate.fields import Clock, Field
from perfgate.measure.mode import Mode

if TYPE_CHECKING:  # torch is imported where a case is counted, never by the gate's session
    import torch

KEY = Field.LAUNCH_COUNTS  # {"kernel_launches": n, "graph_launches": n, "graph_nodes": n}
COUNTED_CALLS = 4  # calls profiled after one warm-up call
KERNEL_LAUNCHES = {
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
}
GRAPH_LAUNCHES = {"cudaGraphLaunch", "cuGraphLaunch"}
GRAPH_NODES = {"kernel", "gpu_memcpy", "gpu_memset"}  # device work a graph launch can run
HOST_APIS = {"cuda_runtime", "cuda_driver"}


def _api_name(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)  # CUPTI names some entry points by version: _v7000


def count_trace(events: list[dict], calls: int) -> dict[str, int | float]:
    """Per-call launch counts from a Chrome trace's events (``calls`` calls profiled):
    ``kernel_launches`` (kernels the host launched itself), ``graph_launches`` and
    ``graph_nodes`` (device work whose correlation id is a graph launch's)."""
    from perfgate.measure.exact_counters import per_call

    kernels = graphs = nodes = 0
    graph_correlations = set()
    for event in events:
        if event.get("cat") in HOST_APIS:
            name = _api_name(event.get("name", ""))
            kernels += name in KERNEL_LAUNCHES
            if name in GRAPH_LAUNCHES:
                graphs += 1
                graph_correlations.add((event.get("args") or {}).get("correlation"))
    for event in events:
        correlation = (event.get("args") or {}).get("correlation")
        nodes += event.get("cat") in GRAPH_NODES and correlation in graph_correlations
    return {
        "kernel_launches": per_call(kernels, calls),
        "graph_launches": per_call(graphs, calls),
        "graph_nodes": per_call(nodes, calls),
    }


def count_case(benchmark, fn: Callable[[], object], device: torch.device, mode: Mode) -> dict:
    """Count ``fn``'s launches instead of timing it (counting mode), into ``mode.counts``."""
    import torch

    fn()
    torch.cuda.synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(COUNTED_CALLS):
            fn()
        torch.cuda.synchronize(device)
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.json"
        profile.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text(encoding="utf-8")).get("traceEvents", [])
    mode.counts[benchmark.fullname] = count_trace(events, COUNTED_CALLS)
    _pytest_benchmark.mark_not_timed(benchmark)
    return {Field.CLOCK: Clock.COUNTED}
