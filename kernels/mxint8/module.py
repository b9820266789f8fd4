"""``MXINT8Linear``: an ``nn.Linear`` whose weight and bias persist as MXINT8 (~8.25 bits each)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kernels.mxint8.dequantize_kernel import dequantize
from kernels.mxint8.format import DEFAULT_GROUP_SIZE, describe
from kernels.mxint8.linear import fused_linear_supported, mxint8_linear
from kernels.mxint8.quantizer import quantize


class MXINT8Linear(nn.Module):
    """``nn.Linear`` with weight and bias stored as MXINT8, like the lab's ``QLinearPacked``.

    Two ways to run a forward, chosen by ``fused`` (an attribute, flip it at will):
    - ``fused=False``, the lab's way: dequantize the whole weight to bf16, cast it to the input's
      dtype, call ``F.linear`` (the bf16 weight lives transiently). Any device, dtype and group.
    - ``fused=True``: ``mxint8_linear``, which dequantizes inside the matmul, wherever that
      kernel runs (CUDA, or CPU under TRITON_INTERPRET=1; bf16/fp16/fp32 inputs, power-of-two
      groups); elsewhere the lab's way.
    - ``fused=None`` (the default): fused on CUDA, the lab's way on CPU (where the kernel only
      runs through Triton's slow interpreter). Measured on an H100 (docs/NOTES.md), the fused
      kernel beats dequantize-then-linear up to batch 128 (1.3-3.9x) and loses from 256, so
      from 256 rows (``DEQUANTIZE_ONCE_MIN_BATCH``) ``mxint8_linear`` dequantizes once and calls
      cuBLAS, unless the committed config table holds the shape for this GPU: chosen by batch
      size, never timed per process (tuning.py's ``choose_path``).
    Inputs must be floating point; gradients flow to the input on both paths.
    """

    def __init__(
        self, linear: nn.Linear, group_size: int = DEFAULT_GROUP_SIZE, fused: bool | None = None
    ):
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be an nn.Linear, got {type(linear).__name__}")
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.group_size = group_size
        self.fused = fused
        weight_mantissa, weight_scales = quantize(linear.weight.detach(), group_size)
        self.register_buffer("weight_mantissa", weight_mantissa)
        self.register_buffer("weight_scales", weight_scales)
        if linear.bias is None:
            self.bias_mantissa = self.bias_scales = None
        else:
            padded = F.pad(linear.bias.detach(), (0, (-linear.out_features) % group_size))
            bias_mantissa, bias_scales = quantize(padded, group_size)
            self.register_buffer("bias_mantissa", bias_mantissa)
            self.register_buffer("bias_scales", bias_scales)

    def uses_fused_path(self, x: torch.Tensor) -> bool:
        """Whether a forward on ``x`` runs the fused kernel."""
        if self.fused is False or not fused_linear_supported(x, self.group_size):
            return False
        return self.fused is True or x.device.type == "cuda"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise ValueError(f"MXINT8Linear needs a floating-point input, got {describe(x)}")
        bias = None
        if self.bias_mantissa is not None:
            bias = dequantize(self.bias_mantissa, self.bias_scales, self.group_size)
            bias = bias[: self.out_features]
        if self.uses_fused_path(x):
            weight = (self.weight_mantissa, self.weight_scales)
            return mxint8_linear(x, *weight, bias, self.group_size)
        weight = dequantize(self.weight_mantissa, self.weight_scales, self.group_size)
        return F.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))

    @property
    def storage_bytes(self) -> int:
        """Bytes of the persistent MXINT8 buffers (weight and bias, mantissas and scales)."""
        return sum(b.numel() * b.element_size() for b in self.buffers())

    @property
    def bits_per_weight(self) -> float:
        """Storage bits per weight element: 8 + 8 / group_size, bias excluded."""
        weight_bytes = self.weight_mantissa.numel() + self.weight_scales.numel()
        return 8.0 * weight_bytes / self.weight_mantissa.numel()

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mantissa is not None}, group_size={self.group_size}, "
            f"fused={self.fused}"
        )
