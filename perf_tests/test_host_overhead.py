"""Host overhead in instructions: what a call costs the CPU before any real compute, counted by
callgrind (``pytest perf_tests --perf-measure instructions``; deselected otherwise).

Every case is counted in three valgrind processes per session (``measure/callgrind.py``); each
reads its counts and stores them like a benchmark (1 instruction = 1 ns nominal). Shapes are
tiny on purpose: the count is dominated by dispatch, Python, guards and launcher checks.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernels.mxint8 import MXINT8Linear, dequantize_reference, quantize
from perf_tests.models import ResNet18
from perf_tests.test_sdpa import naive_attention
from perfgate.measure.callgrind import HostCase
from perfgate.measure.instructions import record_instructions

# Tolerance 0.5 %, tighter than the gate's 1 %: allocator left out (measure/instructions.py,
# ALLOCATOR) a case reads within 0.1 % in every process, whatever ran before it
# (docs/gate-validation/instructions-session5/), so 1 % of added host work always fails, where a
# 1 % tolerance would pass it about half of the time.
pytestmark = [pytest.mark.perfgate(family="host", threshold=0.005), pytest.mark.instructions]

IMAGE = (1, 3, 32, 32)  # batch 1, a CIFAR-sized image: ResNet-18's layer 4 sees 1x1
LINEAR = (256, 256)  # out x in features of the MXINT8 layer, batch 1
ATTENTION = (1, 4, 16, 32)  # batch, heads, sequence, head dim
DEQUANTIZE_ELEMENTS = 4096


def resnet18_eager() -> functools.partial:
    return functools.partial(ResNet18().eval(), torch.randn(IMAGE))


def resnet18_compiled() -> functools.partial:
    """Compiled on its first call, which the runner makes before counting anything."""
    torch._dynamo.reset()
    return functools.partial(torch.compile(ResNet18().eval(), dynamic=False), torch.randn(IMAGE))


def mxint8_linear() -> functools.partial:
    out_features, in_features = LINEAR
    return functools.partial(
        MXINT8Linear(nn.Linear(in_features, out_features)), torch.randn(1, in_features)
    )


def attention(implementation) -> functools.partial:
    return functools.partial(implementation, *(torch.randn(ATTENTION) for _ in range(3)))


def dequantize() -> functools.partial:
    mantissa, scales = quantize(torch.randn(DEQUANTIZE_ELEMENTS))
    return functools.partial(dequantize_reference, mantissa, scales)


# calls per repeat: enough that a repeat is millions of instructions, so one-off effects (an
# allocator's first fit, a dictionary resize) stay far below 1 % of it; one ResNet-18 call is
# tens of millions by itself
HOST_CASES = {
    "resnet18-eager-1x3x32x32": HostCase(resnet18_eager, calls=1),
    "resnet18-compiled-1x3x32x32": HostCase(resnet18_compiled, calls=1, count_aten_ops=False),
    "mxint8-linear-256x256-batch1": HostCase(mxint8_linear, calls=5),
    "sdpa-1x4x16x32": HostCase(functools.partial(attention, F.scaled_dot_product_attention), 50),
    "naive-attention-1x4x16x32": HostCase(functools.partial(attention, naive_attention), 50),
    "dequantize-reference-4096": HostCase(dequantize, calls=20),
}


@pytest.mark.parametrize("case", list(HOST_CASES))
def test_host_overhead(benchmark, instruction_counts, case):
    benchmark.group = "host overhead: instructions per call (1 ns = 1 instruction)"
    record_instructions(benchmark, instruction_counts[case])
