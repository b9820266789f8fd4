"""Unit tests for the fused MXINT8 linear's warp-specialized mixed-input GEMM for Hopper
(kernels/mxint8/linear_mma_ws.py, config kernel "mma_ws").

Gluon has no interpreter, so on the CPU: an "mma_ws" config runs as MMA_WS_FALLBACK there and
matches the reference, and swept configs are built for Hopper (sm_90a) with Triton's own
compiler and assembler, which must report no spills, tensor-core (HGMMA) instructions and no
serialized wgmma (the overlap this kernel exists for). On a Hopper GPU (marked gpu): the
weights bit for bit on every (mantissa, scale) pair, scale 255's NaN, ragged shapes and a bias
against the reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import mxint8 as fl
from kernels.mxint8 import dequantize_reference, linear_launch, linear_tile, quantize

MAX_RELATIVE_ERROR = 1e-2
WIDE = fl.LinearConfig(256, 128, 64, 1, 4, 4, kernel="mma_ws")
NARROW = fl.LinearConfig(128, 128, 64, 1, 4, 6, kernel="mma_ws")
SMALL = fl.LinearConfig(16, 128, 64, 1, 4, 12, kernel="mma_ws")  # batch 2-16
BUILD_TOOL = Path(__file__).resolve().parents[1] / "kernels" / "tools" / "mxint8_hopper_build.py"

pytest.importorskip("triton.experimental.gluon", reason="Gluon needs Triton >= 3.5")


def all_pairs_weight(scale_low: int, scale_high: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[256, 256] mantissas, each row -128..127, and [256, 8] scales (group 32) in which every
    scale of the range meets every mantissa."""
    mantissa = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256, 1)
    count = scale_high - scale_low + 1
    scales = scale_low + (torch.arange(256)[:, None] + torch.arange(8)[None, :]) % count
    return mantissa, scales.to(torch.uint8)


# --- CPU -----------------------------------------------------------------------------------------
def test_mma_ws_config_runs_as_the_triton_gemm_where_gluon_cannot(device):
    if not fl.triton_available_for(device):
        pytest.skip("a Triton kernel on CPU tensors needs TRITON_INTERPRET=1")
    mantissa, scales = quantize(torch.randn(70, 256, device=device) * 0.05, 32)
    x = torch.randn(5, 256, device=device).to(torch.bfloat16)
    bias = torch.randn(70, device=device)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, 32)
    y = fl.mxint8_linear(x, mantissa, scales, bias, 32, config=WIDE)
    assert fl.relative_error(y, expected) < MAX_RELATIVE_ERROR
    assert linear_launch.MMA_WS_FALLBACK.kernel == "mma"


def test_an_mma_ws_config_names_its_fixed_block_shape():
    with pytest.raises(ValueError, match="block_n=128, block_k=64, split_k=1"):
        fl.LinearConfig(256, 64, 64, 1, 4, 4, kernel="mma_ws")
    with pytest.raises(ValueError, match="split_k=1"):
        fl.LinearConfig(256, 128, 64, 2, 4, 4, kernel="mma_ws")


def test_swept_mma_ws_configs_build_for_hopper_with_overlapping_wgmma():
    """Two swept configs built for sm_90a here: ptxas keeps the wgmma instructions asynchronous
    (it serializes them, with a note, when the accumulator or the register operand is written
    while one is in flight, or when registers run short), and nothing spills."""
    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("Triton's ptxas is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(BUILD_TOOL.parents[2])
    run = subprocess.run(
        [sys.executable, BUILD_TOOL, "256,4", "128,8"], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    reports = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(reports) == 2
    for report in reports:
        assert "error" not in report, report
        assert report["serialized"] == [], report
        assert report["spill_bytes"] == 0 and report["sass"]["LDL"] == 0, report
        assert report["shared_bytes"] <= 227 * 1024, report
        sass = report["sass"]
        assert sass["HGMMA"], report
        # one wait a loop drains the tensor cores; every other leaves one wgmma in flight
        assert sass["wgmma waits for none in flight"] < sass["wgmma waits"] / 4, report


# --- GPU -----------------------------------------------------------------------------------------
def _hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the mma_ws kernel needs a Hopper GPU")


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WIDE, NARROW, SMALL], ids=["256-rows", "128-rows", "16-rows"])
@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales-inline-assembly", "all-finite-scales-six-steps"],
)
def test_mma_ws_weights_are_dequantized_bit_for_bit_on_gpu(scale_low, scale_high, config):
    _hopper()
    mantissa, scales = all_pairs_weight(scale_low, scale_high)
    identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
    got = fl.mxint8_linear(identity, mantissa.cuda(), scales.cuda(), None, 32, config=config)
    expected = dequantize_reference(mantissa, scales, 32).t()
    differ = got.cpu().view(torch.int16) != expected.view(torch.int16)
    # Tensor cores may flush bf16 subnormal operands (scales 0..6 only); nothing else may differ
    subnormal = expected.float().abs() < 2.0**-126
    assert not (differ & ~subnormal).any(), f"{int((differ & ~subnormal).sum())} values differ"


@pytest.mark.gpu
def test_mma_ws_scale_255_gives_nan_where_the_reference_does_on_gpu():
    _hopper()
    mantissa, scales = quantize(torch.randn(300, 512, device="cuda") * 0.05, 32)
    scales[7, 1] = 255
    x = torch.randn(20, 512, device="cuda").to(torch.bfloat16)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32)
    for config in (WIDE, NARROW):
        y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
        assert torch.equal(torch.isnan(y), torch.isnan(expected)), config


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 13, 300, 512])
@pytest.mark.parametrize("group_size", [32, 128])
@pytest.mark.parametrize("config", [WIDE, NARROW, SMALL], ids=["256-rows", "128-rows", "16-rows"])
def test_mma_ws_matches_reference_with_tails_and_bias_on_gpu(m, group_size, config):
    """N (1000) off the 128-row tiles, M off the batch tiles (the copy engine reads zeros past
    them), K of 40 blocks, groups of one or two blocks."""
    _hopper()
    torch.manual_seed(0)
    mantissa, scales = quantize(torch.randn(1000, 2560, device="cuda") * 0.02, group_size)
    x = torch.randn(m, 2560, device="cuda").to(torch.bfloat16)
    bias = torch.randn(1000, device="cuda")
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, group_size)
    y = fl.mxint8_linear(x, mantissa, scales, bias, group_size, config=config)
    assert y.dtype == torch.bfloat16
    assert fl.relative_error(y, expected) < MAX_RELATIVE_ERROR


@pytest.mark.gpu
def test_mma_ws_takes_what_the_copy_engine_cannot_read_through_the_fallback_on_gpu():
    _hopper()
    mantissa, scales = quantize(torch.randn(256, 200, device="cuda") * 0.02, 8)  # K % 64 != 0
    x = torch.randn(64, 200, device="cuda").to(torch.bfloat16)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 8)
    y = fl.mxint8_linear(x, mantissa, scales, None, 8, config=WIDE)
    assert fl.relative_error(y, expected) < MAX_RELATIVE_ERROR
