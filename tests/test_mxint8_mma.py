"""Unit tests for the fused MXINT8 linear's mixed-input GEMM (kernels/mxint8/linear_mma.py) in
both orientations ("mma": out^T = W @ x^T, "mma_plain": out = x @ W^T), its configs and the
sweep's candidates.

On CPU the kernel runs through Triton's interpreter (float32 in place of the inline assembly)
at small ragged shapes: values against the float32 reference by relative error, the weights bit
for bit on every (mantissa, scale) pair (x = I), the six-step redo for scales outside 7..252,
NaN on scale 255, K splits. GPU-only tests (the inline assembly, batch 512) are marked gpu.
"""

from __future__ import annotations

import pytest
import torch

from kernels import mxint8 as fl
from kernels.mxint8 import dequantize_reference, linear_launch, linear_tile, quantize, tuning
from kernels.mxint8.linear_sweep import sweep_configs

MAX_RELATIVE_ERROR = 1e-2
MMA = fl.LinearConfig(16, 32, 64, kernel="mma")  # several tiles at these shapes
PLAIN = fl.LinearConfig(16, 32, 64, kernel="mma_plain")
MMA_SPLIT = fl.LinearConfig(16, 32, 32, split_k=2, kernel="mma")
CONFIGS = [MMA, PLAIN, MMA_SPLIT]
IDS = ["mma", "mma_plain", "mma-split2"]


@pytest.fixture
def on_interpreter(device):
    if not fl.triton_available_for(device):
        pytest.skip("a Triton kernel on CPU tensors needs TRITON_INTERPRET=1")
    return device


def relative_error_to_reference(y, x, mantissa, scales, bias, group_size) -> float:
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, group_size)
    assert y.shape == expected.shape and y.dtype == x.dtype
    return fl.relative_error(y, expected)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize(
    "m, n, k, group_size, dtype",
    [
        (17, 70, 160, 32, torch.bfloat16),  # M, N and K tails
        (5, 40, 256, 128, torch.float16),  # a group spans blocks
        (3, 36, 128, 8, torch.bfloat16),  # several groups a block
    ],
)
def test_mma_matches_reference(m, n, k, group_size, dtype, config, on_interpreter):
    mantissa, scales = quantize(torch.randn(n, k, device=on_interpreter) * 0.05, group_size)
    mantissa[0, :5] = -128  # the spec's +0.0
    x = torch.randn(m, k, device=on_interpreter).to(dtype)
    bias = torch.randn(n, device=on_interpreter)
    y = fl.mxint8_linear(x, mantissa, scales, bias, group_size, config=config)
    error = relative_error_to_reference(y, x, mantissa, scales, bias, group_size)
    assert error < MAX_RELATIVE_ERROR


def all_pairs_weight(scale_low: int, scale_high: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[256, 256] mantissas, each row -128..127, and [256, 8] scales (group 32): row r's group j
    has scale_low + (r + j) % count, so every scale meets every mantissa (with 7..252, each
    (mantissa, scale) pair at least once)."""
    mantissa = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256, 1)
    count = scale_high - scale_low + 1
    scales = scale_low + (torch.arange(256)[:, None] + torch.arange(8)[None, :]) % count
    return mantissa, scales.to(torch.uint8)


@pytest.mark.parametrize("kernel", ["mma", "mma_plain"])
@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales", "all-finite-scales-six-steps"],
)
def test_mma_weights_are_dequantized_bit_for_bit(scale_low, scale_high, kernel, on_interpreter):
    mantissa, scales = all_pairs_weight(scale_low, scale_high)
    per_value = scales.repeat_interleave(32, dim=1)
    pairs = torch.unique(mantissa.int() * 256 + per_value.int())
    assert pairs.numel() >= 256 * min(256, scale_high - scale_low + 1)
    config = fl.LinearConfig(64, 64, 64, kernel=kernel)
    # float32 x, so float32 out: the interpreter's float32 -> bf16 cast rounds subnormals wrongly
    got = fl.mxint8_linear(torch.eye(256), mantissa, scales, None, 32, config=config)
    got = got.to(torch.bfloat16)  # exact: each output is one weight times 1.0
    expected = dequantize_reference(mantissa, scales, 32).t()
    both_zero = (got == 0) & (expected == 0)  # a sum turns the spec's -0.0 into +0.0
    differ = (got.view(torch.int16) != expected.view(torch.int16)) & ~both_zero
    assert not differ.any(), f"{int(differ.sum())} of 65536 weights differ"


def test_mma_scale_255_gives_nan_where_the_reference_does(on_interpreter):
    mantissa, scales = quantize(torch.randn(40, 128) * 0.05, 32)
    scales[7, 1] = 255
    x = torch.randn(3, 128).to(torch.bfloat16)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32)
    for config in CONFIGS:
        y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
        assert torch.equal(torch.isnan(y), torch.isnan(expected)), config


def test_mma_split_is_deterministic_and_leaves_counters_at_zero(on_interpreter):
    mantissa, scales = quantize(torch.randn(40, 256) * 0.05, 32)
    x = torch.randn(5, 256).to(torch.bfloat16)
    first = fl.mxint8_linear(x, mantissa, scales, None, 32, config=MMA_SPLIT)
    assert torch.equal(fl.mxint8_linear(x, mantissa, scales, None, 32, config=MMA_SPLIT), first)
    assert not linear_launch._counters[x.device].any(), "an arrival counter was left non-zero"


def test_sweep_offers_the_mma_kernel_from_batch_2_and_both_orientations_from_128():
    assert "mma" in {c.kernel for c in tuning.path_candidates(16, 14336, 4096)}
    assert {c.kernel for c in sweep_configs(512, 4096)} == {"mma", "mma_plain"}
    assert not {c.kernel for c in tuning.path_candidates(1, 4096, 4096)} & {"mma", "mma_plain"}


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["mma", "mma_plain"])
@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales-inline-assembly", "all-finite-scales-six-steps"],
)
def test_mma_weights_are_dequantized_bit_for_bit_on_gpu(scale_low, scale_high, kernel):
    mantissa, scales = all_pairs_weight(scale_low, scale_high)
    identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
    config = fl.LinearConfig(128, 128, 64, 1, 8, 3, kernel=kernel)
    got = fl.mxint8_linear(identity, mantissa.cuda(), scales.cuda(), None, 32, config=config)
    expected = dequantize_reference(mantissa, scales, 32).t()
    differ = got.cpu().view(torch.int16) != expected.view(torch.int16)
    # Tensor cores may flush bf16 subnormal operands (scales 0..6 only); nothing else may differ
    subnormal = expected.float().abs() < 2.0**-126
    assert not (differ & ~subnormal).any(), f"{int((differ & ~subnormal).sum())} values differ"


@pytest.mark.gpu
@pytest.mark.parametrize("config", sweep_configs(512, 4096), ids=str)
def test_every_large_batch_mma_config_matches_reference(config):
    mantissa, scales = quantize(torch.randn(4096, 4096, device="cuda") * 0.02, 32)
    x = torch.randn(512, 4096, device="cuda").to(torch.bfloat16)
    y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
    assert relative_error_to_reference(y, x, mantissa, scales, None, 32) < MAX_RELATIVE_ERROR
