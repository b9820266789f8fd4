"""Time the mma_ws kernel (kernels/mxint8/linear_mma_ws.py at commit 9eee62c) with its
dequantization replaced, each variant in its own process (Triton caches a kernel's binary by
its source, so a replaced function must be in place before the first compile).

Variants: "asm" (the kernel as committed), "plain_cast" (the mantissas cast to bf16, no scale:
wrong values, the shared-memory reads kept), "no_load" (no mantissa read at all: the wgmma
pipeline, copies and stores alone). CUDA-graph device time of 20 launches, median of 5.
Run from the repository root at that commit: ``python probe.py``.
"""

import json
import os
import subprocess
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.insert(0, os.getcwd())
from kernels.mxint8 import linear_mma_ws as ws  # noqa: E402
from kernels.mxint8 import quantize  # noqa: E402
from kernels.mxint8.linear_launch import LinearConfig  # noqa: E402


@gluon.jit
def _plain_cast(w_slot, row0, e0, e1, a_layout: gl.constexpr, USUAL: gl.constexpr):
    return w_slot.slice(row0, 64, dim=0).load(a_layout).to(gl.bfloat16)


@gluon.jit
def _no_load(w_slot, row0, e0, e1, a_layout: gl.constexpr, USUAL: gl.constexpr):
    step = ((gl.expand_dims(e0 + e1, 1) - 6) << 7).to(gl.int16).to(gl.bfloat16, bitcast=True)
    return gl.broadcast(step, gl.full([64, 64], 0, gl.bfloat16, a_layout))[0]


def run(variant: str, n: int, m: int, block_m: int, stages: int) -> None:
    if variant == "plain_cast":
        ws._weights = _plain_cast
    elif variant == "no_load":
        ws._weights = _no_load
    torch.manual_seed(0)
    mantissa, scales = quantize(torch.randn(n, 4096, device="cuda") * 0.02, 32)
    x = torch.randn(m, 4096, device="cuda").to(torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    config = LinearConfig(block_m, 128, 64, 1, 4, stages, kernel="mma_ws")

    def call():
        ws.launch_mma_ws(x, mantissa, scales, None, out, 32, config)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            call()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / 20)
    us = round(sorted(times)[2], 1)
    fields = dict(variant=variant, n=n, m=m, block_m=block_m, stages=stages, us=us)
    print(json.dumps(fields), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1], *map(int, sys.argv[2:]))
    else:
        for variant in ("asm", "no_load"):
            for n, m, block_m in ((14336, 512, 256), (4096, 512, 128)):
                args = [variant, str(n), str(m), str(block_m), "4"]
                subprocess.run([sys.executable, __file__, *args], check=False)
