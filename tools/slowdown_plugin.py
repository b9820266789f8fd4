"""A pytest plugin that makes chosen benchmarks deliberately slower, to prove the gate sees it.

Not for real runs. ``pytest perf_tests -p tools.slowdown_plugin --perf-gate`` with
``PERFGATE_SLOWDOWN`` set to one of:
- ``dequantize-twice``: the Triton dequantization kernel is launched twice per call.
- ``sdpa-15``: every fused attention call does 15 % more work (an extra call on a 15 % slice).
- ``cpu-25``: every call timed on the CPU sleeps for a quarter of its own duration.
- ``gpu-sleep-N``: every timed CUDA call is followed by ``torch.cuda._sleep`` sized at N % of the
  case's own per-call time (measured first: CUDA-graph device time for kernels, synchronized wall
  time for models). The sleep's own device time is saved in ``extra_info["injected_s"]`` so the
  real size can be read against an uninjected run (the nightly's A/B: load this plugin in B only).
"""

from __future__ import annotations

import json
import os
import time

import torch
import torch.nn.functional as F

import kernels.mxint8
import kernels.mxint8.module
import perfgate.timing

MODE = os.environ.get("PERFGATE_SLOWDOWN", "")


def _sleep_cycles_per_second() -> float:
    """SM cycles that torch.cuda._sleep spins per second, at the clock it runs at now."""
    cycles = 2_000_000
    torch.cuda._sleep(cycles)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) / 1000.0)


def _with_sleep(fn, cycles: int):
    def call():
        result = fn()
        torch.cuda._sleep(cycles)
        return result

    return call


def _sleep_seconds(cycles: int, device) -> float:
    return perfgate.timing.graph_seconds_per_call([lambda: torch.cuda._sleep(cycles)], device)


def _cycles_for(seconds: float, device) -> int:
    """Sleep cycles that add ``seconds`` per call, less the cost of one more kernel node."""
    node = _sleep_seconds(1, device)
    return max(1, int((seconds - node) * _sleep_cycles_per_second()))


def _injected(benchmark, cycles: int, per_call: float, device) -> dict:
    """The sleep's own device time per call next to the case's uninjected time; one line per
    case in $PERFGATE_SLOWDOWN_LOG too (an A/B keeps no block's JSON)."""
    facts = {"injected_s": _sleep_seconds(cycles, device), "uninjected_s": per_call}
    if log := os.environ.get("PERFGATE_SLOWDOWN_LOG"):
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"name": benchmark.name, **facts}) + "\n")
    return facts


def _install_gpu_sleep(fraction: float) -> None:
    original_device, original_wall = perfgate.timing.time_device, perfgate.timing.time_wall

    def time_device(benchmark, calls, device, budget):
        if device.type != "cuda" or benchmark.disabled:
            return original_device(benchmark, calls, device, budget)
        per_call = perfgate.timing.graph_seconds_per_call(calls, device)
        cycles = _cycles_for(fraction * per_call, device)
        facts = original_device(benchmark, [_with_sleep(c, cycles) for c in calls], device, budget)
        return facts | _injected(benchmark, cycles, per_call, device)

    def time_wall(benchmark, fn, device, budget):
        if device.type != "cuda" or benchmark.disabled:
            return original_wall(benchmark, fn, device, budget)
        per_call = perfgate.timing.seconds_per_call(fn, device, calls=10)
        cycles = _cycles_for(fraction * per_call, device)
        facts = original_wall(benchmark, _with_sleep(fn, cycles), device, budget)
        return facts | _injected(benchmark, cycles, per_call, device)

    import perf_tests.test_compile
    import perf_tests.test_mxint8
    import perf_tests.test_sdpa

    for module in (perf_tests.test_compile, perf_tests.test_mxint8, perf_tests.test_sdpa):
        if hasattr(module, "time_wall"):
            module.time_wall = time_wall
        if hasattr(module, "time_device"):
            module.time_device = time_device


def pytest_configure(config) -> None:
    if MODE.startswith("gpu-sleep-"):
        _install_gpu_sleep(float(MODE.removeprefix("gpu-sleep-")) / 100.0)
    elif MODE == "dequantize-twice":
        original = kernels.mxint8.dequantize

        def dequantize_twice(mantissa, scales, group_size=32):
            original(mantissa, scales, group_size)
            return original(mantissa, scales, group_size)

        kernels.mxint8.dequantize = dequantize_twice
        kernels.mxint8.module.dequantize = dequantize_twice  # MXINT8Linear's unfused path
        import perf_tests.test_mxint8 as bench

        bench.DEQUANTIZERS["triton"] = dequantize_twice
    elif MODE == "sdpa-15":
        original_sdpa = F.scaled_dot_product_attention

        def sdpa_with_extra_work(q, k, v, *args, **kwargs):
            rows = max(1, int(0.15 * q.shape[0]))
            original_sdpa(q[:rows], k[:rows], v[:rows], *args, **kwargs)
            return original_sdpa(q, k, v, *args, **kwargs)

        F.scaled_dot_product_attention = sdpa_with_extra_work
    elif MODE == "cpu-25":
        original_wall = perfgate.timing.time_wall

        def slower(fn):
            def call():
                start = time.perf_counter()
                result = fn()
                time.sleep(0.25 * (time.perf_counter() - start))
                return result

            return call

        def time_wall(benchmark, fn, device, budget):
            return original_wall(benchmark, slower(fn), device, budget)

        perfgate.timing.time_wall = time_wall
        import perf_tests.test_compile
        import perf_tests.test_mxint8
        import perf_tests.test_sdpa

        for module in (perf_tests.test_compile, perf_tests.test_mxint8, perf_tests.test_sdpa):
            if hasattr(module, "time_wall"):
                module.time_wall = time_wall
