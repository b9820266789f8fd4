"""Models the benchmarks run, defined here so no model zoo package is needed."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

RESNET18_PARAMETERS = 11_689_512  # torchvision's resnet18(num_classes=1000)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection, ResNet-18's building block."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 with the ImageNet head: the architecture of torchvision's resnet18."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        self.layers = nn.Sequential(
            *[
                nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout))
                for cin, cout, stride in widths
            ]
        )
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class EncoderLayer(nn.Module):
    """Post-norm transformer encoder layer (BERT's), every projection a plain nn.Linear."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attention_out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        return x.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (self._split_heads(p(x)) for p in (self.query, self.key, self.value))
        context = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        x = self.attention_norm(x + self.attention_out(context))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class EncoderClassifier(nn.Module):
    """A BERT-style encoder with a classification head on the first token."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, ffn: int, classes: int):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.embedding_norm = nn.LayerNorm(hidden)
        self.layers = nn.Sequential(*[EncoderLayer(hidden, heads, ffn) for _ in range(layers)])
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.embedding_norm(self.embeddings(tokens)))
        return self.classifier(x[:, 0])


BERT_BASE = dict(vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, classes=2)
BERT_SMALL = dict(vocab=30522, hidden=256, layers=4, heads=4, ffn=1024, classes=2)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def quantize_linears(model: nn.Module, group_size: int, skip: tuple[str, ...] = ()) -> nn.Module:
    """Replace every nn.Linear in ``model`` (in place) by an MXINT8Linear, except names in skip."""
    from kernels.mxint8 import MXINT8Linear

    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full_name = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and full_name not in skip:
                setattr(module, child_name, MXINT8Linear(child, group_size))
    return model
