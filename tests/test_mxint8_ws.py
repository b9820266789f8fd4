"""Unit tests for the fused MXINT8 linear's warp-specialized Gluon kernel
(kernels/mxint8/linear_ws.py, configs "ws" and "ws_plain").

Gluon has no interpreter, so on the CPU: a "ws" config runs as WS_FALLBACK there and matches
the reference; every swept config is built for Hopper (sm_90a) with Triton's own compiler and
assembler, which must report no register spills, tensor-core (HGMMA) instructions, register
hand-over between the warp groups (setmaxnreg) and shared memory within a program's limit. On a
Hopper GPU (marked gpu): the weights bit for bit on every (mantissa, scale) pair in both
orientations, scale 255's NaN, K splits deterministic, and each swept config against the
reference.
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
from kernels.mxint8.linear_sweep import SHARED_MEMORY_LIMIT, ws_configs, ws_shared_bytes

MAX_RELATIVE_ERROR = 1e-2
WS_SPLIT = fl.LinearConfig(16, 128, 64, 4, 4, 8, kernel="ws")
WS_PLAIN = fl.LinearConfig(128, 128, 64, 1, 8, 4, kernel="ws_plain")

gluon = pytest.importorskip("triton.experimental.gluon", reason="Gluon needs Triton >= 3.5")


def all_pairs_weight(scale_low: int, scale_high: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[256, 256] mantissas, each row -128..127, and [256, 8] scales (group 32) in which every
    scale of the range meets every mantissa."""
    mantissa = torch.arange(-128, 128, dtype=torch.int16).to(torch.int8).repeat(256, 1)
    count = scale_high - scale_low + 1
    scales = scale_low + (torch.arange(256)[:, None] + torch.arange(8)[None, :]) % count
    return mantissa, scales.to(torch.uint8)


# --- CPU -----------------------------------------------------------------------------------------
def test_ws_config_runs_as_the_tile_kernel_where_gluon_cannot(device):
    if not fl.triton_available_for(device):
        pytest.skip("a Triton kernel on CPU tensors needs TRITON_INTERPRET=1")
    mantissa, scales = quantize(torch.randn(70, 256, device=device) * 0.05, 32)
    x = torch.randn(5, 256, device=device).to(torch.bfloat16)
    bias = torch.randn(70, device=device)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, 32)
    for config in (WS_SPLIT, WS_PLAIN):
        y = fl.mxint8_linear(x, mantissa, scales, bias, 32, config=config)
        assert fl.relative_error(y, expected) < MAX_RELATIVE_ERROR


def test_sweep_offers_ws_at_every_batch_within_shared_memory():
    for bucket, kernels in ((1, {"ws"}), (16, {"ws"}), (64, {"ws"}), (512, {"ws", "ws_plain"})):
        configs = ws_configs(bucket, 4096)
        assert {c.kernel for c in configs} == kernels
        assert all(ws_shared_bytes(c) <= SHARED_MEMORY_LIMIT for c in configs)
        assert all(c.block_m >= 8 for c in configs)  # wgmma's narrowest N


BUILD_TOOL = Path(__file__).resolve().parents[1] / "kernels" / "tools" / "mxint8_hopper_build.py"


def test_every_swept_ws_config_builds_for_hopper_without_spills():
    """Every swept "ws" config (one K split of each shape), built for sm_90a here."""
    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("Triton's ptxas is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(BUILD_TOOL.parents[2])
    run = subprocess.run(
        [sys.executable, BUILD_TOOL, "--swept"], capture_output=True, text=True, env=env,
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    reports = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(reports) >= 20
    for report in reports:
        assert "error" not in report, report
        assert report["spill_bytes"] == 0 and report["sass"]["LDL"] == 0, report
        assert report["shared_bytes"] <= SHARED_MEMORY_LIMIT, report
        sass = report["sass"]
        assert sass["HGMMA"] and sass["USETMAXREG"], report  # tensor cores, registers handed over
        assert sass["LDS.128"] and sass["STS.128"], report  # 16-byte shared-memory accesses


# --- GPU -----------------------------------------------------------------------------------------
def _hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the ws kernel needs a Hopper GPU")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "config", [WS_PLAIN, fl.LinearConfig(64, 128, 64, 1, 4, 4, kernel="ws")], ids=str
)
@pytest.mark.parametrize(
    "scale_low, scale_high",
    [(linear_tile.USUAL_SCALE_MIN, linear_tile.USUAL_SCALE_MAX), (0, 254)],
    ids=["usual-scales-inline-assembly", "all-finite-scales-six-steps"],
)
def test_ws_weights_are_dequantized_bit_for_bit_on_gpu(scale_low, scale_high, config):
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
def test_ws_scale_255_gives_nan_where_the_reference_does_on_gpu():
    _hopper()
    mantissa, scales = quantize(torch.randn(300, 512, device="cuda") * 0.05, 32)
    scales[7, 1] = 255
    x = torch.randn(20, 512, device="cuda").to(torch.bfloat16)
    expected = fl.mxint8_linear_reference(x, mantissa, scales, None, 32)
    for config in (WS_SPLIT, WS_PLAIN):
        y = fl.mxint8_linear(x, mantissa, scales, None, 32, config=config)
        assert torch.equal(torch.isnan(y), torch.isnan(expected)), config


@pytest.mark.gpu
def test_ws_split_is_deterministic_and_leaves_counters_at_zero_on_gpu():
    _hopper()
    mantissa, scales = quantize(torch.randn(1000, 4096, device="cuda") * 0.02, 32)
    x = torch.randn(16, 4096, device="cuda").to(torch.bfloat16)
    first = fl.mxint8_linear(x, mantissa, scales, None, 32, config=WS_SPLIT)
    assert torch.equal(fl.mxint8_linear(x, mantissa, scales, None, 32, config=WS_SPLIT), first)
    assert not linear_launch._counters[x.device].any(), "an arrival counter was left non-zero"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "m, config",
    [
        (1, fl.LinearConfig(8, 128, 64, 2, 4, 12, kernel="ws")),  # rows past M read as zeros
        (16, fl.LinearConfig(16, 128, 64, 4, 4, 8, kernel="ws")),
        (37, fl.LinearConfig(64, 128, 64, 1, 4, 4, kernel="ws")),
        (300, fl.LinearConfig(256, 128, 64, 1, 8, 3, kernel="ws_plain")),
        (512, fl.LinearConfig(128, 128, 64, 1, 8, 4, kernel="ws")),
    ],
    ids=str,
)
def test_ws_configs_match_reference_with_tails_on_gpu(m, config):
    """N (1000) and M off the tiles, K (2000) off the blocks and splits; every swept config's
    error is recorded by kernels/tools/mxint8_sweep.py."""
    _hopper()
    torch.manual_seed(0)
    mantissa, scales = quantize(torch.randn(1000, 2000, device="cuda") * 0.02, 16)
    x = torch.randn(m, 2000, device="cuda").to(torch.bfloat16)
    bias = torch.randn(1000, device="cuda")
    expected = fl.mxint8_linear_reference(x, mantissa, scales, bias, 16)
    y = fl.mxint8_linear(x, mantissa, scales, bias, 16, config=config)
    assert fl.relative_error(y, expected) < MAX_RELATIVE_ERROR
