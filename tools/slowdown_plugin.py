"""A pytest plugin that makes chosen benchmarks deliberately slower, to prove the gate sees it.

Not for real runs. ``pytest perf_tests -p tools.slowdown_plugin --perf-gate`` with
``PERFGATE_SLOWDOWN`` set to one of:
- ``dequantize-twice``: the Triton dequantization kernel is launched twice per call.
- ``sdpa-15``: every fused attention call does 15 % more work (an extra call on a 15 % slice).
- ``cpu-25``: every call timed on the CPU sleeps for a quarter of its own duration.
"""

from __future__ import annotations

import os
import time

import torch.nn.functional as F

import kernels.mxint8
import kernels.mxint8.module
import perfgate.timing

MODE = os.environ.get("PERFGATE_SLOWDOWN", "")


def pytest_configure(config) -> None:
    if MODE == "dequantize-twice":
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
