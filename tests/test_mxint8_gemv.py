"""Unit tests for the batch-1 GEMV kernels of the fused MXINT8 linear (kernels/mxint8/
linear_gemv.py, linear_gemv_stream.py), their configs and the table's choice of path.

On CPU they run through Triton's interpreter at small ragged shapes: values against the float32
reference by relative error, the weights bit for bit on every (mantissa, scale) pair (x = I),
determinism and the arrival counters of the split and stream forms.
"""

from __future__ import annotations

import pytest
import torch

from kernels import mxint8 as fl
from kernels.mxint8 import dequantize_reference, linear_launch, quantize, tuning

MAX_RELATIVE_ERROR = 1e-2
GEMV = fl.LinearConfig(1, 16, 64, 2, 4, 3, kernel="gemv")  # several row blocks and K splits
STREAM = fl.LinearConfig(1, 16, 64, 1, 4, 3, kernel="gemv_stream", programs_per_sm=2)
CONFIGS = [GEMV, STREAM, fl.LinearConfig(1, 32, 128, 1, 4, 3, kernel="gemv")]
IDS = ["gemv-split2", "stream", "gemv"]


def relative_error_to_reference(y, x, mantissa, scales, bias, group_size) -> float:
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, group_size)
    assert y.shape == expected.shape and y.dtype == x.dtype
    return fl.relative_error(y, expected)


@pytest.fixture
def on_interpreter(device):
    if not fl.triton_available_for(device):
        pytest.skip("a Triton kernel on CPU tensors needs TRITON_INTERPRET=1")
    return device


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize(
    "m, n, k, group_size", [(1, 40, 256, 32), (3, 33, 512, 128), (2, 48, 256, 8)]
)
def test_gemv_matches_reference(m, n, k, group_size, config, on_interpreter):
    mantissa, scales = quantize(torch.randn(n, k, device=on_interpreter) * 0.05, group_size)
    mantissa[0, :5] = -128  # the spec's +0.0
    x = torch.randn(m, k, device=on_interpreter).to(torch.bfloat16)
    bias = torch.randn(n, device=on_interpreter)
    y = fl.mxint8_linear(x, mantissa, scales, bias, group_size, config=config)
    assert (
        relative_error_to_reference(y, x, mantissa, scales, bias, group_size) < MAX_RELATIVE_ERROR
    )


@pytest.mark.parametrize("config", CONFIGS[:2], ids=IDS[:2])
def test_gemv_is_deterministic_and_leaves_counters_at_zero(config, on_interpreter):
    mantissa, scales = quantize(torch.randn(40, 320, device=on_interpreter) * 0.05, 32)
    x = torch.randn(1, 320, device=on_interpreter).to(torch.bfloat16)
    first = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
    assert torch.equal(fl.mxint8_linear(x, mantissa, scales, None, 32, config=config), first)
    assert not linear_launch._counters[x.device].any(), "an arrival counter was left non-zero"


# Both GEMV forms share the conversion (linear_gemv._word_products); the stream form's own paths
# are covered above and by the scale-255 test. Wide blocks: few programs for the interpreter.
# Every scale 0..254 (255 is NaN: the test below): a superset of the usual range's pairs, each
# (mantissa, scale) pair once in a 1024 x 64 weight (group j: mantissas 32 (j % 8) on, scale
# j // 8), read one weight per output through the identity.
@pytest.mark.parametrize("low, high", [(0, 254)])
def test_gemv_weights_are_dequantized_bit_for_bit(low, high, on_interpreter):
    mantissa = (torch.arange(1024 * 64) % 256 - 128).to(torch.int8).view(1024, 64)
    scales = (low + torch.arange(2048).view(1024, 2) // 8 % (high - low + 1)).to(torch.uint8)
    pairs = torch.unique(mantissa.int() * 256 + scales.repeat_interleave(32, dim=1).int())
    assert pairs.numel() == 256 * (high - low + 1)  # every (v, e) pair is in the weight
    wide = fl.LinearConfig(1, 1024, 64, 1, 4, 3, kernel="gemv")
    got = fl.mxint8_linear(torch.eye(64), mantissa, scales, None, 32, config=wide)
    expected = dequantize_reference(mantissa, scales, 32).t()
    got = got.to(torch.bfloat16)  # exact: each output is one weight times 1.0
    differ = (got.view(torch.int16) != expected.view(torch.int16)) & ~((got == 0) & (expected == 0))
    assert not differ.any(), f"{int(differ.sum())} of {differ.numel()} weights differ"


def test_gemv_scale_255_gives_nan_where_the_reference_does(on_interpreter):
    mantissa, scales = quantize(torch.randn(32, 128) * 0.05, 32)
    scales[3, 1] = 255
    x = torch.randn(1, 128).to(torch.bfloat16)
    for config in CONFIGS:
        y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
        expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32)
        assert torch.equal(torch.isnan(y), torch.isnan(expected)), config


def test_a_gemv_config_that_does_not_fit_runs_the_tile_kernel(on_interpreter):
    mantissa, scales = quantize(torch.randn(40, 96) * 0.05, 32)  # K = 96: no whole 64-blocks split
    x = torch.randn(1, 96).to(torch.float16)  # and float16 x, which the GEMV does not read
    assert not linear_launch.gemv_fits(x, GEMV, 32)
    y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=GEMV)
    assert relative_error_to_reference(y, x, mantissa, scales, None, 32) < MAX_RELATIVE_ERROR


@pytest.mark.parametrize(
    "fields, pattern",
    [
        (dict(kernel="gemm"), "kernel='gemm'"),
        (dict(kernel="gemv", block_m=16), "block_m=1"),
        (dict(kernel="gemv_stream", block_m=1, split_k=2, programs_per_sm=2), "split_k=1"),
        (dict(kernel="gemv_stream", block_m=1), "programs_per_sm"),
    ],
)
def test_config_rejects_what_its_kernel_cannot_run(fields, pattern):
    with pytest.raises(ValueError, match=pattern.replace("(", r"\(")):
        fl.LinearConfig(**{"block_m": 16, "block_n": 32, "block_k": 64, **fields})


def test_batch_1_has_its_own_bucket_and_gemv_candidates():
    assert linear_launch.m_bucket(1) == 1 and linear_launch.m_bucket(2) == 16
    candidates = tuning.path_candidates(1, 4096, 4096)
    assert set(fl.candidate_configs(1, 4096, 4096)) <= set(candidates)
    assert {c.kernel for c in candidates} == {"tile", "gemv", "gemv_stream"}
    assert {c.kernel for c in tuning.path_candidates(16, 4096, 4096)} == {"tile", "mma"}


def test_large_batches_run_fused_only_where_the_table_has_an_entry(monkeypatch):
    monkeypatch.setattr(tuning.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tuning, "device_name", lambda device: "some gpu")
    table = {"some gpu": {tuning.table_key(512, 64, 64, 32): fl.LinearConfig(128, 64, 64)}}
    monkeypatch.setattr(tuning, "config_table", lambda: table)
    assert tuning.chosen_path(512, 64, 64, 32, True, "cuda") == "fused"
    assert tuning.chosen_path(512, 128, 64, 32, True, "cuda") == "dequantize_once"
    assert tuning.chosen_path(16, 128, 64, 32, True, "cuda") == "fused"
