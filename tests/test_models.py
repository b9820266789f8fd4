"""The benchmark models and the harness's small pure helpers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kernels.mxint8 import MXINT8Linear
from perf_tests.models import (
    BERT_BASE,
    BERT_SMALL,
    RESNET18_PARAMETERS,
    EncoderClassifier,
    ResNet18,
    count_parameters,
    quantize_linears,
)
from perfgate.measure import timing
from perfgate.measure.machine import slug
from perfgate.measure.timing import Budget, copy_bandwidth_gbps, plan_rounds, rotation_count


def test_resnet18_has_torchvisions_parameter_count_and_imagenet_head():
    model = ResNet18().eval()
    assert count_parameters(model) == RESNET18_PARAMETERS == 11_689_512
    with torch.inference_mode():
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1000)


def test_bert_base_config_is_bert_base_sized():
    # 12 layers of 768 wide: ~85 M in the encoder layers, ~23 M in the embeddings
    model = EncoderClassifier(**BERT_BASE)
    assert 105e6 < count_parameters(model) < 112e6


def test_quantize_linears_replaces_every_linear_but_the_skipped_head():
    model = quantize_linears(EncoderClassifier(**BERT_SMALL), group_size=32, skip=("classifier",))
    kinds = {type(m) for n, m in model.named_modules() if n.rsplit(".", 1)[-1] != "classifier"}
    assert nn.Linear not in kinds and MXINT8Linear in kinds
    assert isinstance(model.classifier, nn.Linear)
    with torch.inference_mode():
        assert model(torch.randint(0, 100, (2, 8))).shape == (2, 2)


def test_plan_rounds_fills_a_round_and_respects_the_round_limits():
    budget = Budget(round_seconds=0.01, case_seconds=1.0, min_rounds=10, max_rounds=100)
    assert plan_rounds(1e-4, budget) == (100, 100)  # 100 calls a round, 1 s / 10 ms = 100 rounds
    assert plan_rounds(0.5, budget) == (10, 1)  # slow call: one per round, at least 10 rounds


def test_rotation_count_outgrows_the_cache_four_times():
    assert rotation_count(bytes_per_call=3 * 2**20, cache_bytes=50 * 2**20) == 67
    assert rotation_count(bytes_per_call=2**30, cache_bytes=50 * 2**20) == 2


def test_hardware_key_is_folder_safe():
    assert slug("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert slug("AMD EPYC 7B13 (64-Core)/2cores") == "AMD-EPYC-7B13-64-Core-2cores"


@pytest.mark.parametrize("total_bytes", [2**22, 2**22 + 1])
def test_copy_roofline_on_the_cpu_is_bytes_moved_over_the_fastest_of_three_copies(
    total_bytes, monkeypatch
):
    # Each timing really runs the copy; the clock is replaced by known seconds per call, so the
    # roofline's arithmetic (bytes read + written, the fastest of three timings) is exact.
    copied, seconds = [], iter([4e-3, 1e-3, 2e-3])

    def timed(fn, device, calls):
        copied.append(fn())
        return next(seconds)

    monkeypatch.setattr(timing, "seconds_per_call", timed)
    gbps = copy_bandwidth_gbps(total_bytes, torch.device("cpu"))
    half = total_bytes // 2
    assert gbps == 2 * half / 1e-3 / 1e9
    assert len(copied) == 3
    assert all(t.dtype == torch.uint8 and t.numel() == half for t in copied)
    assert copied[0].any()  # it copied random bytes, not an empty buffer


@pytest.mark.gpu
@pytest.mark.parametrize("total_bytes", [2**21, 2**28])
def test_copy_roofline_on_cuda_is_a_plausible_bandwidth(total_bytes):
    gbps = copy_bandwidth_gbps(total_bytes, torch.device("cuda"))
    assert 10 < gbps < 20_000
