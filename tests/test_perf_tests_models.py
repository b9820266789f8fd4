"""The lab's reference models (perf_tests/models.py): sizes and the MXINT8 swap."""

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


def test_resnet18_has_torchvisions_parameter_count_and_imagenet_head():
    model = ResNet18().eval()
    assert count_parameters(model) == RESNET18_PARAMETERS == 11_689_512
    with torch.inference_mode():
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1000)


def test_bert_base_config_is_bert_base_sized():
    # 12 layers of 768 wide: ~85 M in the encoder layers, ~23 M in the embeddings
    model = EncoderClassifier(**BERT_BASE)
    assert 105e6 < count_parameters(model) < 112e6


@pytest.mark.slow
def test_quantize_linears_replaces_every_linear_but_the_skipped_head():
    model = quantize_linears(EncoderClassifier(**BERT_SMALL), group_size=32, skip=("classifier",))
    kinds = {type(m) for n, m in model.named_modules() if n.rsplit(".", 1)[-1] != "classifier"}
    assert nn.Linear not in kinds and MXINT8Linear in kinds
    assert isinstance(model.classifier, nn.Linear)
    with torch.inference_mode():
        assert model(torch.randint(0, 100, (2, 8))).shape == (2, 2)
