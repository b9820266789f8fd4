"""A pytest plugin that makes chosen benchmarks deliberately slower, to prove the gate sees it.

Not for real runs. ``PYTHONPATH=docs/gate-validation/scripts pytest perf_tests -p slowdown_plugin
--perf-gate`` with
``PERFGATE_SLOWDOWN`` set to one of:
- ``dequantize-twice``: the Triton dequantization kernel is launched twice per call.
- ``sdpa-15``: every fused attention call does 15 % more work (an extra call on a 15 % slice).
- ``cpu-25``: every call timed on the CPU sleeps for a quarter of its own duration.
- ``gpu-sleep-N``: every timed CUDA call is followed by ``torch.cuda._sleep`` sized at N % of the
  case's own per-call time (measured first: CUDA-graph device time for kernels, synchronized wall
  time for models), net of the extra kernel node's cost. What it added, measured right there
  against the same calls without it, is saved as ``extra_info["injected_fraction"]`` (and logged
  to ``PERFGATE_SLOWDOWN_LOG``). For the nightly's A/B, load this plugin in B only.
- ``gpu-sleep-table``: the same, sized per case: ``PERFGATE_SLOWDOWN_TABLE`` is a JSON file of
  {test name: percent}; cases it does not name are left alone (the null cases of the same A/B).
  With ``PERFGATE_SLOWDOWN_CYCLES`` (a JSON file), a case's sleep is sized once, in the first
  process that runs it, and every later process (each B block) reuses the same cycles, so the
  injected slowdown does not vary from block to block with each block's own sizing noise.
"""

from __future__ import annotations

import json
import os
import time

import torch
import torch.nn.functional as F

import kernels.mxint8
import kernels.mxint8.module
import perfgate.measure.timing

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


def _sized(fraction: float, seconds_with) -> tuple[int, dict]:
    """Sleep cycles that add ``fraction`` of a call's time, and what they added, measured the
    way the case is timed: ``seconds_with(cycles)`` (None: no sleep). A first try sized from the
    sleep's cycle rate shows the extra kernel node's own cost, which the second try leaves out."""
    base = seconds_with(None)
    rate = _sleep_cycles_per_second()
    cycles = max(1, int(fraction * base * rate))
    node = seconds_with(cycles) - base - cycles / rate
    cycles = max(1, int((fraction * base - node) * rate))
    added = seconds_with(cycles) / base - 1.0
    return cycles, {"uninjected_s": base, "injected_fraction": added, "injected_cycles": cycles}


def _log(benchmark, facts: dict) -> dict:
    """One line per case in $PERFGATE_SLOWDOWN_LOG (an A/B keeps no block's JSON)."""
    if log := os.environ.get("PERFGATE_SLOWDOWN_LOG"):
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"name": benchmark.name, **facts}) + "\n")
    return facts


def _fraction_of(benchmark, fraction: float | None) -> float | None:
    if fraction is not None:
        return fraction
    with open(os.environ["PERFGATE_SLOWDOWN_TABLE"], encoding="utf-8") as table:
        percent = json.load(table).get(benchmark.name)
    return None if percent is None else percent / 100.0


def _cycles(benchmark, fraction: float, seconds_with) -> tuple[int, dict]:
    """``_sized``, or the cycles an earlier process sized for the case (SLOWDOWN_CYCLES)."""
    path = os.environ.get("PERFGATE_SLOWDOWN_CYCLES")
    known = {}
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as stored:
            known = json.load(stored)
    if benchmark.name in known:
        return known[benchmark.name], {"injected_cycles": known[benchmark.name], "reused": True}
    cycles, facts = _sized(fraction, seconds_with)
    if path:
        with open(path, "w", encoding="utf-8") as stored:
            json.dump(known | {benchmark.name: cycles}, stored)
    return cycles, facts


def _install_gpu_sleep(fixed: float | None) -> None:
    original_device, original_wall = (
        perfgate.measure.timing.time_device,
        perfgate.measure.timing.time_wall,
    )

    def time_device(benchmark, calls, device, budget):
        fraction = _fraction_of(benchmark, fixed)
        if device.type != "cuda" or benchmark.disabled or fraction is None:
            return original_device(benchmark, calls, device, budget)

        def seconds_with(cycles):
            wrapped = calls if cycles is None else [_with_sleep(c, cycles) for c in calls]
            return perfgate.measure.timing.graph_seconds_per_call(wrapped, device)

        cycles, facts = _cycles(benchmark, fraction, seconds_with)
        wrapped = [_with_sleep(c, cycles) for c in calls]
        return original_device(benchmark, wrapped, device, budget) | _log(benchmark, facts)

    def time_wall(benchmark, fn, device, budget):
        fraction = _fraction_of(benchmark, fixed)
        if device.type != "cuda" or benchmark.disabled or fraction is None:
            return original_wall(benchmark, fn, device, budget)

        def seconds_with(cycles):
            timed = fn if cycles is None else _with_sleep(fn, cycles)
            return perfgate.measure.timing.seconds_per_call(timed, device, calls=20)

        cycles, facts = _cycles(benchmark, fraction, seconds_with)
        return original_wall(benchmark, _with_sleep(fn, cycles), device, budget) | _log(
            benchmark, facts
        )

    import perf_tests.test_compile
    import perf_tests.test_mxint8
    import perf_tests.test_sdpa

    for module in (perf_tests.test_compile, perf_tests.test_mxint8, perf_tests.test_sdpa):
        if hasattr(module, "time_wall"):
            module.time_wall = time_wall
        if hasattr(module, "time_device"):
            module.time_device = time_device


def pytest_configure(config) -> None:
    if MODE == "gpu-sleep-table":
        _install_gpu_sleep(None)
    elif MODE.startswith("gpu-sleep-"):
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
        original_wall = perfgate.measure.timing.time_wall

        def slower(fn):
            def call():
                start = time.perf_counter()
                result = fn()
                time.sleep(0.25 * (time.perf_counter() - start))
                return result

            return call

        def time_wall(benchmark, fn, device, budget):
            return original_wall(benchmark, slower(fn), device, budget)

        perfgate.measure.timing.time_wall = time_wall
        import perf_tests.test_compile
        import perf_tests.test_mxint8
        import perf_tests.test_sdpa

        for module in (perf_tests.test_compile, perf_tests.test_mxint8, perf_tests.test_sdpa):
            if hasattr(module, "time_wall"):
                module.time_wall = time_wall
