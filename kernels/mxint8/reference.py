"""Plain-PyTorch references, on any device: what the Triton kernels must reproduce.

``dequantize_reference`` is the specification's six steps (docs/MXINT8.md), bit-exact with the
CuTe kernel of mase-cuda (``src/csrc/mxint/dequantize.cuh``) NaN payloads aside;
``mxint8_linear_reference`` is a float32 ``F.linear`` on that weight. Tests, benchmarks and the
GPU tools import these, and ``relative_error``, rather than define their own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.mxint8.format import (
    BF16_EXPONENT_SHIFT,
    BF16_SIGN_BIT,
    DEFAULT_GROUP_SIZE,
    FRACTION_MASK,
    INTEGER_BIT,
    check_dequantize_inputs,
    check_linear_inputs,
)


def _bits_to_bfloat16(bits: torch.Tensor) -> torch.Tensor:
    """Reinterpret the low 16 bits of an int32 tensor as bfloat16."""
    signed = bits - ((bits & BF16_SIGN_BIT) << 1)  # 0..0xFFFF -> -32768..32767, same bits
    return signed.to(torch.int16).view(torch.bfloat16)


def dequantize_reference(
    mantissa: torch.Tensor, scales: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> torch.Tensor:
    """MXINT8 -> bfloat16 in plain PyTorch, bit-exact with the CuTe kernel (NaN payloads aside).

    Groups are consecutive runs of ``group_size`` elements in row-major order; ``scales`` holds
    one biased exponent per group. The output has ``mantissa``'s shape.
    """
    check_dequantize_inputs(mantissa, scales, group_size)
    v = mantissa.reshape(-1, group_size).to(torch.int32)
    e = scales.reshape(-1, 1).to(torch.int32)
    sign = torch.where(v < 0, BF16_SIGN_BIT, 0)
    expo = e << BF16_EXPONENT_SHIFT
    a = v.abs()  # in int32, so |-128| = 128
    frac = (a & FRACTION_MASK) << 1
    out = _bits_to_bfloat16(sign | expo | frac)
    bias = _bits_to_bfloat16(sign | expo)
    without_implicit_one = (out.float() - bias.float()).to(torch.bfloat16)
    y = torch.where((a & INTEGER_BIT) != 0, out, without_implicit_one)
    return y.reshape(mantissa.shape)


def mxint8_linear_reference(
    x: torch.Tensor,
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
) -> torch.Tensor:
    """float32 ``F.linear(x, W, bias)`` with ``W = dequantize_reference(mantissa, scales)``.

    Every operand is upcast to float32 first; the result is float32 whatever x's dtype.
    """
    check_linear_inputs(x, mantissa, scales, bias, group_size)
    weight = dequantize_reference(mantissa, scales, group_size).float()
    return F.linear(x.float(), weight, None if bias is None else bias.float())


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """``||output - reference|| / ||reference||`` in float64: how close a kernel is to its
    reference (the fused linear and the MXINT8 layers stay under 1e-2)."""
    reference = reference.double()
    return ((output.double() - reference).norm() / reference.norm()).item()
