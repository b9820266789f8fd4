"""Unit tests for the fused MXINT8 linear (kernels/mxint8/linear*.py, tuning.py) against its
float32 reference, and MXINT8Linear's choice of path and its gradients.

On CPU the Triton kernel runs through the interpreter, at small shapes whose ragged M, N and K
tails fall inside the blocks of the interpreter's config (64 x 128 x 128) and of a small one
(16 x 32 x 64) that splits them into several tiles. Values are checked by relative error
||y - ref|| / ||ref|| < 1e-2 on fresh random inputs, never zeros; the weight dequantization
inside the kernel is checked bit for bit on every (mantissa, scale) pair by multiplying by the
identity. GPU-only tests (large shapes, batch up to 4096) are marked gpu.
"""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl
from torch import nn
from torch.nn import functional as F

from kernels import mxint8 as fl
from kernels.mxint8 import (
    MXINT8Linear,
    dequantize_reference,
    linear,
    linear_launch,
    linear_tile,
    module,
    quantize,
    tuning,
)

# Tests that launch the kernel on CPU tensors need Triton's interpreter (conftest.py sets it
# where there is no GPU); elsewhere CPU tensors take the reference, by design
requires_interpreter = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1"
)
MAX_RELATIVE_ERROR = 1e-2
SMALL_CONFIG = fl.LinearConfig(16, 32, 64)  # several tiles even at these shapes


# --- Helpers ----------------------------------------------------------------------------------
def skip_unless_the_kernel_runs_on(device: torch.device) -> None:
    if not fl.triton_available_for(device):
        pytest.skip("a Triton kernel on CPU tensors needs TRITON_INTERPRET=1")


def quantized_weight(n: int, k: int, group_size: int, device="cpu", std: float = 0.05):
    """A random float weight quantized as MXINT8: (mantissa [n, k], scales [n, k / group])."""
    return quantize(torch.randn(n, k, device=device) * std, group_size)


def activations(shape: tuple[int, ...], dtype: torch.dtype, device="cpu") -> torch.Tensor:
    return torch.randn(shape, device=device).to(dtype)


def assert_close_to_reference(y, x, mantissa, scales, bias, group_size) -> None:
    """One diagnostic assertion: shape, dtype, device, and relative error against float32."""
    n = mantissa.shape[0]
    assert y.shape == (*x.shape[:-1], n), f"shape {tuple(y.shape)}"
    assert (y.dtype, y.device) == (x.dtype, x.device), f"{y.dtype} on {y.device}"
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, group_size)
    assert not torch.isnan(y).any(), "NaN in the output"
    error = fl.relative_error(y, expected)
    assert error < MAX_RELATIVE_ERROR, (
        f"relative error {error:.3e} for x {tuple(x.shape)} {x.dtype}, W {tuple(mantissa.shape)}, "
        f"group {group_size}, bias {bias is not None}"
    )


# --- Values against the reference -------------------------------------------------------------
RAGGED_SHAPES = [  # (M, N, K, group) against blocks 64 x 128 x 128 (default), 16 x 32 x 64
    (1, 64, 128, 32),
    (3, 40, 96, 32),  # K tail in both
    (17, 70, 160, 32),  # M, N and K tails in both; several N tiles in the small config
    (64, 33, 256, 128),  # a group is 1 (default) or 2 (small) K blocks
    (5, 96, 384, 128),
    (3, 48, 64, 64),
    (2, 32, 64, 8),  # 16 or 8 groups in a K block
    (4, 40, 96, 1),  # a scale per value
    (3, 36, 1024, 512),  # a group spans 4 or 8 K blocks
]


@pytest.mark.parametrize("config", [None, SMALL_CONFIG], ids=["default", "small"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "m, n, k, group_size", RAGGED_SHAPES, ids=[f"{m}x{n}x{k}-g{g}" for m, n, k, g in RAGGED_SHAPES]
)
def test_matches_reference_on_ragged_shapes(m, n, k, group_size, bias, config, device):
    mantissa, scales = quantized_weight(n, k, group_size, device)
    x = activations((m, k), torch.bfloat16, device)
    b = torch.randn(n, device=device) if bias else None
    y = fl.mxint8_linear(x, mantissa, scales, b, group_size, config=config)
    assert_close_to_reference(y, x, mantissa, scales, b, group_size)


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"]
)
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.bfloat16], ids=["b32", "b16"])
def test_activation_dtypes_keep_their_dtype(dtype, bias_dtype, device):
    mantissa, scales = quantized_weight(48, 128, 32, device)
    x = activations((5, 128), dtype, device)
    bias = torch.randn(48, device=device).to(bias_dtype)
    y = fl.mxint8_linear(x, mantissa, scales, bias, 32)
    assert_close_to_reference(y, x, mantissa, scales, bias, 32)


@pytest.mark.parametrize("leading", [(2, 3), (1, 1, 4), (0,)], ids=["2x3", "1x1x4", "empty"])
def test_leading_batch_dimensions_are_flattened_and_restored(leading, device):
    mantissa, scales = quantized_weight(40, 64, 32, device)
    x = activations((*leading, 64), torch.bfloat16, device)
    bias = torch.randn(40, device=device)
    y = fl.mxint8_linear(x, mantissa, scales, bias, 32)
    assert y.shape == (*leading, 40)
    if x.numel():
        assert_close_to_reference(y, x, mantissa, scales, bias, 32)
        flat = fl.mxint8_linear(x.reshape(-1, 64), mantissa, scales, bias, 32)
        assert torch.equal(y.reshape(-1, 40), flat)


def test_non_contiguous_x_equals_its_contiguous_copy(device):
    mantissa, scales = quantized_weight(40, 64, 32, device)
    x = activations((64, 6), torch.bfloat16, device).t()
    assert not x.is_contiguous()
    expected = fl.mxint8_linear(x.contiguous(), mantissa, scales, None, 32)
    assert torch.equal(fl.mxint8_linear(x, mantissa, scales, None, 32), expected)


@pytest.mark.parametrize("split_k", [2, 3, 4])
def test_split_k_is_deterministic_and_leaves_counters_at_zero(split_k, device):
    skip_unless_the_kernel_runs_on(device)
    # 5 K blocks of 64: splits take 3+2, 2+2+1 and 2+2+1+0 of them
    mantissa, scales = quantized_weight(70, 320, 32, device)
    x = activations((17, 320), torch.bfloat16, device)
    bias = torch.randn(70, device=device)
    config = fl.LinearConfig(16, 32, 64, split_k=split_k)
    first = fl.mxint8_linear(x, mantissa, scales, bias, 32, config=config)
    assert_close_to_reference(first, x, mantissa, scales, bias, 32)
    assert torch.equal(fl.mxint8_linear(x, mantissa, scales, bias, 32, config=config), first)
    assert not linear_launch._counters[x.device].any(), "a split-K counter was left non-zero"


@pytest.mark.parametrize(
    "config",
    [
        fl.LinearConfig(16, 16, 32),  # group 32 = block
        fl.LinearConfig(32, 64, 128, split_k=2),  # four groups per block
        fl.LinearConfig(16, 32, 16),  # a group spans two blocks
    ],
    ids=["bk32", "bk128-split2", "bk16"],
)
def test_other_block_shapes_match_reference(config, device):
    mantissa, scales = quantized_weight(72, 256, 32, device)
    x = activations((20, 256), torch.bfloat16, device)
    y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
    assert_close_to_reference(y, x, mantissa, scales, None, 32)


@requires_interpreter
def test_autotuned_launch_times_only_the_candidates_and_runs_the_fastest(monkeypatch):
    # The CUDA path, minus CUDA: the interpreter runs the chosen config; timing is faked
    monkeypatch.setenv(tuning.AUTOTUNE_VARIABLE, "1")
    autotuner = tuning.AUTOTUNED_KERNEL
    monkeypatch.setattr(autotuner, "cache", {})
    monkeypatch.setattr(tuning, "_tuned", {})
    timed = []

    def fake_do_bench(kernel_call, quantiles):
        timed.append(kernel_call)  # not run: the interpreter would take seconds a config
        return [float(len(timed))] * len(quantiles)  # later configs look slower

    monkeypatch.setattr(autotuner, "do_bench", fake_do_bench, raising=False)
    m, n, k = 3, 200, 2048
    mantissa, scales = quantized_weight(n, k, 32)
    x = activations((m, k), torch.bfloat16)
    bias = torch.randn(n)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    tuning.run_tuned(x, mantissa, scales, bias, out, 32)
    candidates = fl.candidate_configs(m, n, k)
    assert len(timed) == len(candidates) > 1
    assert fl.tuned_config(m, n, k, 32) == candidates[0]
    assert tuning.config_source(m, n, k, 32) == "autotuned"
    assert any(c.split_k > 1 for c in candidates)
    assert_close_to_reference(out, x, mantissa, scales, bias, 32)

    # later calls launch the tuned config directly, without the autotuner's per-call work
    def no_autotuner(*args, **kwargs):
        raise AssertionError("the autotuner ran again for a tuned problem")

    monkeypatch.setattr(autotuner, "run", no_autotuner)
    again = torch.empty(m, n, dtype=torch.bfloat16)
    tuning.run_tuned(x, mantissa, scales, bias, again, 32)
    assert torch.equal(again, out)


def forbid_autotuning(monkeypatch) -> None:
    def no_autotuner(*args, **kwargs):
        raise AssertionError("the autotuner ran without MXINT8_AUTOTUNE=1")

    monkeypatch.delenv(tuning.AUTOTUNE_VARIABLE, raising=False)
    monkeypatch.setattr(tuning.AUTOTUNED_KERNEL, "run", no_autotuner)
    monkeypatch.setattr(tuning, "_tuned", {})


@requires_interpreter
def test_the_committed_table_config_runs_by_default_without_autotuning(monkeypatch):
    forbid_autotuning(monkeypatch)
    m, n, k = 3, 200, 2048
    pinned = fl.LinearConfig(16, 64, 128, split_k=2)
    table = {"cpu": {tuning.table_key(m, n, k, 32): pinned}}  # keyed by device name on the CPU
    monkeypatch.setattr(tuning, "config_table", lambda: table)
    mantissa, scales = quantized_weight(n, k, 32)
    x = activations((m, k), torch.bfloat16)
    bias = torch.randn(n)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    tuning.run_tuned(x, mantissa, scales, bias, out, 32)
    assert fl.tuned_config(m, n, k, 32) == pinned
    assert tuning.config_source(m, n, k, 32) == "table cpu"
    assert_close_to_reference(out, x, mantissa, scales, bias, 32)


@requires_interpreter
def test_a_problem_outside_the_table_runs_the_default_config_without_autotuning(monkeypatch):
    forbid_autotuning(monkeypatch)
    monkeypatch.setattr(tuning, "config_table", lambda: {"cpu": {}})
    m, n, k = 5, 72, 512
    mantissa, scales = quantized_weight(n, k, 32)
    x = activations((m, k), torch.bfloat16)
    out = torch.empty(m, n, dtype=torch.bfloat16)
    tuning.run_tuned(x, mantissa, scales, None, out, 32)
    assert fl.tuned_config(m, n, k, 32) == tuning.default_config(m, n, k)
    assert tuning.default_config(m, n, k) in fl.candidate_configs(m, n, k)
    assert tuning.config_source(m, n, k, 32) == "default"
    assert_close_to_reference(out, x, mantissa, scales, None, 32)


def test_every_committed_table_entry_is_a_candidate_of_its_problem():
    table = tuning.config_table()
    assert table, f"{tuning.TABLE_PATH} holds no configs"
    for gpu, entries in table.items():
        for key, config in entries.items():
            bucket, n, k = (int(part) for part in key.split("/")[0].split("x"))
            assert config in tuning.path_candidates(bucket, n, k), (gpu, key, config)


@pytest.mark.parametrize("m", [1, 16, 17, 64, 100, 256, 300, 512, 4096])
@pytest.mark.parametrize("n, k", [(4096, 4096), (14336, 4096), (4096, 14336), (40, 96)])
def test_candidate_configs_are_all_known_to_the_autotuner(m, n, k):
    known = {tuning.from_triton_config(c) for c in tuning.AUTOTUNED_KERNEL.configs}
    candidates = fl.candidate_configs(m, n, k)
    assert candidates and set(candidates) <= known
    # one candidate set per autotuner key: the batch bucket decides, not the batch
    assert candidates == fl.candidate_configs(linear_launch.m_bucket(m), n, k)


# --- Every (mantissa, scale) pair, bit for bit ------------------------------------------------
def all_pairs_weight(scale_low: int, scale_high: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[256, 256] mantissas, each row -128..127, and [256, 8] scales (group 32): row r's group j
    has scale_low + (r + j) % count, so every scale meets every group, so every mantissa."""
    mantissa = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256, 1)
    count = scale_high - scale_low + 1
    scales = scale_low + (torch.arange(256)[:, None] + torch.arange(8)[None, :]) % count
    return mantissa, scales.to(torch.uint8)


@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales-fast-path", "all-finite-scales-six-steps"],
)
def test_weights_are_dequantized_bit_for_bit(scale_low, scale_high):
    mantissa, scales = all_pairs_weight(scale_low, scale_high)
    # x = I gives W^T, one product a value. float32 x, so float32 out: the interpreter's own
    # float32 -> bf16 cast rounds subnormals wrongly, torch's does not
    identity = torch.eye(256, dtype=torch.float32)
    got = fl.mxint8_linear(identity, mantissa, scales, None, 32).to(torch.bfloat16)
    expected = dequantize_reference(mantissa, scales, 32).t()
    got_bits, expected_bits = got.view(torch.int16), expected.view(torch.int16)
    both_zero = (got == 0) & (expected == 0)  # a sum turns the spec's -0.0 into +0.0
    differ = ((got_bits != expected_bits) & ~both_zero).nonzero()
    assert len(differ) == 0, (
        f"{len(differ)} of 65536 values differ, first (k, n): {differ[:5].tolist()}, "
        f"got {got_bits[tuple(differ[0])]:#06x}, expected {expected_bits[tuple(differ[0])]:#06x}"
    )


@triton.jit
def _dequantize_usual_kernel(v_ptr, e_ptr, out_ptr, SIZE: tl.constexpr):
    offs = tl.arange(0, SIZE)
    v = tl.load(v_ptr + offs).to(tl.int32)
    e = tl.load(e_ptr + offs).to(tl.int32)
    tl.store(out_ptr + offs, linear_tile.dequantize_usual(v, e))


def test_fast_dequantization_equals_the_six_steps_on_every_usual_pair(device):
    skip_unless_the_kernel_runs_on(device)
    v = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256).to(device)
    e = torch.arange(256, dtype=torch.int16).repeat_interleave(256).to(device)
    usual = (e >= linear_tile.USUAL_SCALE_MIN) & (e <= linear_tile.USUAL_SCALE_MAX)
    v, e = v[usual], e[usual].to(torch.uint8)
    size = triton.next_power_of_2(v.numel())
    v, e = F.pad(v, (0, size - v.numel())), F.pad(e, (0, size - e.numel()), value=127)
    out = torch.empty(size, dtype=torch.bfloat16, device=device)
    _dequantize_usual_kernel[(1,)](v, e, out, SIZE=size)
    expected = dequantize_reference(v, e, 1)
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))


@triton.jit
def _dequantize_words_kernel(words_ptr, e_ptr, out_ptr, WORDS: tl.constexpr):
    offs = tl.arange(0, WORDS)
    step = linear_tile.bf16_step_pair(tl.load(e_ptr + offs).to(tl.int32))
    low, high = linear_tile.dequantize_words(tl.load(words_ptr + offs), step)
    tl.store(out_ptr + 2 * offs, low)
    tl.store(out_ptr + 2 * offs + 1, high)


@pytest.mark.gpu
def test_word_dequantization_equals_the_six_steps_on_every_usual_pair():
    # inline assembly: CUDA only. Each word holds four consecutive mantissas of one scale
    v = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256)
    e = torch.arange(256, dtype=torch.int16).repeat_interleave(256)
    usual = (e >= linear_tile.USUAL_SCALE_MIN) & (e <= linear_tile.USUAL_SCALE_MAX)
    v, e = v[usual], e[usual].to(torch.uint8)
    words = triton.next_power_of_2(v.numel() // 4)
    v, e = F.pad(v, (0, 4 * words - v.numel())), F.pad(e, (0, 4 * words - e.numel()), value=127)
    out = torch.empty(2 * words, dtype=torch.int32, device="cuda")
    _dequantize_words_kernel[(1,)](v.cuda().view(torch.int32), e[::4].cuda(), out, WORDS=words)
    expected = dequantize_reference(v, e, 1)
    got = out.cpu().view(torch.bfloat16)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
def test_scale_255_gives_nan_where_the_reference_does():
    mantissa, scales = quantized_weight(40, 64, 32)
    scales[7, 1] = 255  # NaN and inf weights in row 7: output column 7 is NaN
    x = activations((3, 64), torch.bfloat16)
    y = fl.mxint8_linear(x, mantissa, scales, None, 32)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32)
    assert torch.equal(torch.isnan(y), torch.isnan(expected))
    finite = ~torch.isnan(expected)
    error = (y.float()[finite] - expected[finite]).norm() / expected[finite].norm()
    assert error < MAX_RELATIVE_ERROR


def test_random_codes_with_edge_values_match_reference(device):
    # Mantissa -128 and scales 0..6 and 253..254 sit outside the fast path's range: each
    # program meeting one redoes its share with the spec's six steps
    mantissa = torch.randint(-128, 128, (70, 192), dtype=torch.int8, device=device)
    scales = torch.randint(100, 140, (70, 6), dtype=torch.uint8, device=device)
    scales[3, 2], scales[40, 0], scales[41, 5], scales[66, 1] = 0, 5, 253, 254
    x = activations((9, 192), torch.bfloat16, device) * 2.0**-24  # keeps 2^127 * x finite
    y = fl.mxint8_linear(x, mantissa, scales, None, 32).double()
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32).double()
    # per output column, as rows of scale 253 dwarf the others
    error = (y - expected).norm(dim=0) / expected.norm(dim=0)
    assert error.max() < MAX_RELATIVE_ERROR, f"column {error.argmax()}: {error.max():.3e}"


@requires_interpreter
def test_cpu_runs_the_triton_kernel_not_the_reference(monkeypatch):
    reference = linear.mxint8_linear_reference
    calls = []

    def counting_reference(*args, **kwargs):
        calls.append(args)
        return reference(*args, **kwargs)

    monkeypatch.setattr(linear, "mxint8_linear_reference", counting_reference)
    mantissa, scales = quantized_weight(40, 64, 32)
    fl.mxint8_linear(activations((3, 64), torch.bfloat16), mantissa, scales, None, 32)
    assert not calls, "mxint8_linear fell back to mxint8_linear_reference on CPU"


# --- MXINT8Linear: fused and dequantize-then-linear agree ----------------------------------
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_layer_fused_and_unfused_agree(bias, dtype, device):
    layer = MXINT8Linear(nn.Linear(96, 40, bias=bias), group_size=32, fused=True).to(device)
    x = activations((2, 5, 96), dtype, device)
    with torch.no_grad():
        fused = layer(x)
        layer.fused = False
        unfused = layer(x)
    assert (fused.shape, fused.dtype) == (unfused.shape, unfused.dtype) == ((2, 5, 40), dtype)
    error = fl.relative_error(fused, unfused)
    assert error < MAX_RELATIVE_ERROR, f"fused vs unfused: relative error {error:.3e}"


@requires_interpreter
def test_layer_fused_flag_picks_the_path(monkeypatch):
    calls = []
    monkeypatch.setattr(module, "mxint8_linear", lambda *args, **kwargs: calls.append(args))
    layer = MXINT8Linear(nn.Linear(64, 8), group_size=32, fused=False)
    layer(torch.randn(2, 64))
    assert not calls
    layer.fused = True
    layer(torch.randn(2, 64))
    assert len(calls) == 1


def test_layer_with_unsupported_group_size_uses_dequantize_then_linear(monkeypatch):
    monkeypatch.setattr(module, "mxint8_linear", lambda *args, **kwargs: pytest.fail("fused path"))
    layer = MXINT8Linear(nn.Linear(96, 8), group_size=48, fused=True)  # not a power of two
    assert layer(torch.randn(2, 96)).shape == (2, 8)


def test_layer_default_is_fused_on_cuda_only(monkeypatch):
    layer = MXINT8Linear(nn.Linear(64, 8), group_size=32)
    assert layer.fused is None
    assert not layer.uses_fused_path(torch.randn(2, 64))  # CPU: the interpreter is slow
    monkeypatch.setattr(module, "mxint8_linear", lambda *args, **kwargs: pytest.fail("fused"))
    assert layer(torch.randn(2, 64)).shape == (2, 8)


@pytest.mark.gpu
def test_layer_default_is_fused_on_cuda():
    layer = MXINT8Linear(nn.Linear(64, 8), group_size=32).cuda()
    assert layer.uses_fused_path(torch.randn(2, 64, device="cuda"))
    layer.fused = False
    assert not layer.uses_fused_path(torch.randn(2, 64, device="cuda"))


# --- Gradients: never silently dropped --------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_gradients_match_the_reference(dtype, bias, device):
    mantissa, scales = quantized_weight(40, 96, 32, device)
    x = activations((2, 3, 96), dtype, device).requires_grad_()
    b = torch.randn(40, device=device, requires_grad=True) if bias else None
    grad = torch.randn(2, 3, 40, device=device).to(dtype)
    y = fl.mxint8_linear(x, mantissa, scales, b, 32)
    assert y.requires_grad and y.grad_fn is not None, "the output lost its graph"
    y.backward(grad)

    weight = dequantize_reference(mantissa, scales, 32).float()
    assert x.grad.dtype == dtype
    x_error = fl.relative_error(x.grad, grad.float() @ weight)
    assert x_error < MAX_RELATIVE_ERROR, f"input gradient: relative error {x_error:.2e}"
    if bias:
        assert fl.relative_error(b.grad, grad.float().sum((0, 1))) < MAX_RELATIVE_ERROR


def test_layer_gradients_agree_between_paths(device):
    skip_unless_the_kernel_runs_on(device)
    layer = MXINT8Linear(nn.Linear(96, 40), group_size=32, fused=True).to(device)
    x0, grads = activations((5, 96), torch.float32, device), {}
    for fused in (True, False):
        layer.fused = fused
        x = x0.clone().requires_grad_()
        layer(x).square().sum().backward()
        grads[fused] = x.grad
    error = fl.relative_error(grads[True], grads[False])
    assert error < MAX_RELATIVE_ERROR, f"fused vs unfused input gradient: {error:.2e}"


def test_no_graph_without_grad(device):
    mantissa, scales = quantized_weight(40, 96, 32, device)
    x = activations((3, 96), torch.bfloat16, device).requires_grad_()
    with torch.no_grad():
        y = fl.mxint8_linear(x, mantissa, scales, None, 32)
    assert not y.requires_grad


# --- Rejections: each names the offending argument --------------------------------------------
def _valid(n: int = 8, k: int = 64) -> dict:
    mantissa, scales = quantized_weight(n, k, 32)
    return dict(x=torch.randn(3, k), mantissa=mantissa, scales=scales, bias=torch.randn(n))


REJECTIONS = {  # name: (change to valid arguments, exception, pattern the message must contain)
    "x_int": (dict(x=torch.ones(3, 64, dtype=torch.int32)), TypeError, r"\bx\b"),
    "x_float64": (dict(x=torch.randn(3, 64, dtype=torch.float64)), TypeError, r"\bx\b"),
    "x_not_a_tensor": (dict(x=[[1.0] * 64]), TypeError, r"\bx\b"),
    "x_wrong_k": (dict(x=torch.randn(3, 32)), ValueError, r"\bx\b"),
    "x_0d": (dict(x=torch.tensor(1.0)), ValueError, r"\bx\b"),
    "mantissa_uint8": (dict(mantissa=torch.zeros(8, 64, dtype=torch.uint8)), TypeError,
                       "mantissa"),
    "mantissa_1d": (dict(mantissa=torch.zeros(512, dtype=torch.int8)), ValueError, "mantissa"),
    "mantissa_3d": (dict(mantissa=torch.zeros(2, 4, 64, dtype=torch.int8)), ValueError,
                    "mantissa"),
    "scales_int8": (dict(scales=torch.zeros(8, 2, dtype=torch.int8)), TypeError, "scales"),
    "scales_flat": (dict(scales=torch.zeros(16, dtype=torch.uint8)), ValueError, "scales"),
    "scales_too_few": (dict(scales=torch.zeros(8, 1, dtype=torch.uint8)), ValueError, "scales"),
    "bias_int": (dict(bias=torch.ones(8, dtype=torch.int64)), TypeError, "bias"),
    "bias_wrong_length": (dict(bias=torch.randn(9)), ValueError, "bias"),
    "bias_2d": (dict(bias=torch.randn(1, 8)), ValueError, "bias"),
    "k_not_multiple_of_group": (dict(mantissa=torch.zeros(8, 48, dtype=torch.int8),
                                     x=torch.randn(3, 48)), ValueError, "group_size"),
    "group_size_zero": (dict(group_size=0), ValueError, "group_size"),
    "group_size_float": (dict(group_size=32.0), TypeError, "group_size"),
}  # fmt: skip


@pytest.mark.parametrize(
    "function", [fl.mxint8_linear, fl.mxint8_linear_reference], ids=["kernel", "reference"]
)
@pytest.mark.parametrize("change, error, pattern", REJECTIONS.values(), ids=list(REJECTIONS.keys()))
def test_rejects_bad_input(function, change, error, pattern):
    arguments = {**_valid(), "group_size": 32, **change}
    with pytest.raises(error, match=pattern):
        function(**arguments)


@pytest.mark.parametrize("group_size", [3, 48, 96])
def test_kernel_rejects_group_sizes_not_a_power_of_two(group_size):
    mantissa, scales = quantized_weight(8, 192, group_size)
    with pytest.raises(ValueError, match="group_size.*dequantize-then-linear"):
        fl.mxint8_linear(torch.randn(2, 192), mantissa, scales, None, group_size)
    # the reference and MXINT8Linear(fused=False) still take them
    reference = fl.mxint8_linear_reference(torch.randn(2, 192), mantissa, scales, None, group_size)
    assert reference.shape == (2, 8)


@pytest.mark.gpu
@pytest.mark.parametrize("on_cpu", ["x", "mantissa", "scales", "bias"])
def test_rejects_tensors_on_different_devices(on_cpu):
    arguments = {name: t.cuda() for name, t in _valid().items()}
    arguments[on_cpu] = arguments[on_cpu].cpu()
    with pytest.raises(ValueError, match="device"):
        fl.mxint8_linear(**arguments, group_size=32)


# --- GPU only: the sizes the interpreter cannot reach -----------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("group_size", [32, 128])
@pytest.mark.parametrize("m", [1, 16, 100, 512, 4096])
@pytest.mark.parametrize("n, k", [(4096, 4096), (14336, 4096), (1000, 1056)])
def test_large_shapes_match_reference(n, k, m, group_size):
    if k % group_size:
        pytest.skip("K is not a multiple of the group size")
    mantissa, scales = quantized_weight(n, k, group_size, "cuda")
    x = activations((m, k), torch.bfloat16, "cuda")
    bias = torch.randn(n, device="cuda")
    y = fl.mxint8_linear(x, mantissa, scales, bias, group_size)
    assert_close_to_reference(y, x, mantissa, scales, bias, group_size)


@pytest.mark.gpu
@pytest.mark.parametrize("config", fl.candidate_configs(16, 4096, 4096), ids=str)
def test_every_gemv_candidate_config_matches_reference(config):
    mantissa, scales = quantized_weight(4096, 4096, 32, "cuda")
    x = activations((16, 4096), torch.bfloat16, "cuda")
    y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
    assert_close_to_reference(y, x, mantissa, scales, None, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("group_size", [32, 128])
@pytest.mark.parametrize("config", fl.candidate_configs(512, 14336, 4096), ids=str)
def test_every_large_batch_candidate_config_matches_reference(config, group_size):
    # (256, 128, 64) with 3 pipeline stages once gave NaN here at group 128 only
    mantissa, scales = quantized_weight(14336, 4096, group_size, "cuda")
    x = activations((512, 4096), torch.bfloat16, "cuda")
    y = fl.mxint8_linear(x, mantissa, scales, None, group_size, config=config)
    assert_close_to_reference(y, x, mantissa, scales, None, group_size)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales-fast-path", "all-finite-scales-six-steps"],
)
def test_weights_are_dequantized_bit_for_bit_on_gpu(scale_low, scale_high):
    mantissa, scales = all_pairs_weight(scale_low, scale_high)
    identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
    got = fl.mxint8_linear(identity, mantissa.cuda(), scales.cuda(), None, 32).cpu()
    expected = dequantize_reference(mantissa, scales, 32).t()
    differ = got.view(torch.int16) != expected.view(torch.int16)
    # Tensor cores may flush bf16 subnormal operands (scales 0..6 only); nothing else may differ
    subnormal = expected.float().abs() < 2.0**-126
    assert not (differ & ~subnormal).any(), f"{int((differ & ~subnormal).sum())} values differ"
    assert (got[differ] == 0).all(), "a subnormal weight came out as neither itself nor zero"


@pytest.mark.gpu
def test_indexes_past_2_31_weight_elements():
    n, k = 2**31 // 4096 + 64, 4096  # 2^31 + 2^18 mantissas
    free, _ = torch.cuda.mem_get_info()
    if free < 3 * 2**30:
        pytest.skip(f"needs 3 GiB of free GPU memory, {free / 2**30:.1f} GiB free")
    mantissa = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
    scales = torch.randint(110, 130, (n, k // 32), dtype=torch.uint8, device="cuda")
    x = activations((2, k), torch.bfloat16, "cuda")
    y = fl.mxint8_linear(x, mantissa, scales, None, 32)
    tail = slice(n - 128, n)  # rows whose offsets pass 2^31
    expected = fl.mxint8_linear_reference(x, mantissa[tail], scales[tail], None, 32)
    assert fl.relative_error(y[:, tail], expected) < MAX_RELATIVE_ERROR


def test_all_pairs_weight_holds_every_pair():
    for low, high in [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)]:
        mantissa, scales = all_pairs_weight(low, high)
        per_value = scales.repeat_interleave(32, dim=1)
        pairs = torch.unique(mantissa.int() * 256 + per_value.int())
        assert pairs.numel() == 256 * (high - low + 1)


def test_fused_or_dequantize_once_is_decided_by_batch_not_by_timing():
    from kernels.mxint8.tuning import DEQUANTIZE_ONCE_MIN_BATCH, chosen_path

    big, small = DEQUANTIZE_ONCE_MIN_BATCH, DEQUANTIZE_ONCE_MIN_BATCH // 2
    assert chosen_path(big, 4096, 4096, 32, True, "cuda") == "dequantize_once"
    assert chosen_path(small, 14336, 4096, 32, True, "cuda") == "fused"
    assert chosen_path(big, 4096, 4096, 32, True, "cpu") == "fused"
