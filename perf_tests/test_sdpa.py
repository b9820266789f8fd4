"""Kernel fusion: the lab's naive attention vs F.scaled_dot_product_attention, per backend.

Each case first checks that its output agrees with an fp32 naive reference on the same inputs,
so a fast wrong kernel cannot pass, then times device time per call (CUDA graph replay over
rotating inputs on CUDA, wall time on the CPU).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from perfgate import Ratio
from perfgate.measure.timing import l2_cache_bytes, record_rates, rotation_count, time_device

pytestmark = pytest.mark.perfgate(
    family="sdpa",
    ratios=[Ratio("speedup over naive attention", key="implementation", reference="naive")],
)

LAB_SHAPE = (32, 8, 128, 64)  # batch, heads, sequence, head dim
SHAPES = {  # per (device, --perf-tier)
    ("cpu", "quick"): [LAB_SHAPE],
    ("cpu", "default"): [LAB_SHAPE],
    ("cpu", "full"): [LAB_SHAPE, (8, 16, 512, 64)],
    ("cuda", "quick"): [LAB_SHAPE],
    ("cuda", "default"): [LAB_SHAPE, (8, 16, 1024, 64)],
    ("cuda", "full"): [LAB_SHAPE, (8, 16, 1024, 64), (4, 16, 4096, 128)],
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# max |fused - fp32 reference| allowed, per input dtype
TOLERANCE = {torch.float32: 2e-3, torch.bfloat16: 3e-2, torch.float16: 5e-3}
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
IMPLEMENTATIONS = ["naive", *BACKENDS]
TIERED_PARAMETERS = {"shape": SHAPES}


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The lab's unfused attention: matmul, scale, softmax, matmul."""
    score = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.size(-1)))
    return torch.softmax(score, dim=-1) @ v


def attention_call(implementation: str, q, k, v):
    if implementation == "naive":
        return lambda: naive_attention(q, k, v)
    backend = BACKENDS[implementation]

    def fused():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v)

    return fused


def run_or_skip_unsupported(call, implementation: str, dtype_name: str):
    """Run once; a backend that cannot take these inputs skips with PyTorch's reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return call()
        except RuntimeError as error:
            if "No available kernel" not in str(error):
                raise
            reasons = "; ".join(str(w.message).splitlines()[0] for w in caught)
            pytest.skip(f"{implementation} does not support {dtype_name} here: {reasons}")


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_attention(benchmark, bench_device, perf_budget, shape, dtype_name, implementation):
    device, dtype = bench_device, DTYPES[dtype_name]
    if device.type == "cpu" and implementation in ("efficient", "cudnn"):
        pytest.skip(f"the {implementation} backend exists only on CUDA")

    def make_inputs():
        return [torch.randn(shape, device=device, dtype=dtype) for _ in range(3)]

    q, k, v = make_inputs()
    out = run_or_skip_unsupported(
        attention_call(implementation, q, k, v), implementation, dtype_name
    )
    expected = naive_attention(q.float(), k.float(), v.float())
    error = (out.float() - expected).abs().max().item()
    assert error <= TOLERANCE[dtype], f"{implementation} {dtype_name}: max abs error {error:.2e}"

    bytes_per_call = 4 * q.numel() * q.element_size()  # q, k, v read, out written
    sets = rotation_count(bytes_per_call, l2_cache_bytes(device)) if device.type == "cuda" else 1
    calls = [attention_call(implementation, *make_inputs()) for _ in range(sets)]
    benchmark.group = f"sdpa {'x'.join(map(str, shape))} {dtype_name} {device.type}"
    facts = time_device(benchmark, calls, device, perf_budget)

    batch, heads, seq, head_dim = shape
    flops = 4 * batch * heads * seq * seq * head_dim  # QK^T and PV
    benchmark.extra_info.update(
        facts,
        shape=list(shape),
        dtype=dtype_name,
        implementation=implementation,
        device=device.type,
        max_abs_error=error,
        flops=flops,
        min_bytes=bytes_per_call,
    )
    record_rates(benchmark, flops=flops, nbytes=bytes_per_call)
