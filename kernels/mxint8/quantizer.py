"""FP32/BF16/FP16 -> MXINT8, as mase-cuda's simulated quantizer does it (docs/MXINT8.md)."""

from __future__ import annotations

import torch

from kernels.mxint8.format import (
    BF16_MAX,
    DEFAULT_GROUP_SIZE,
    FLOAT32_SMALLEST_NORMAL,
    MANTISSA_FRACTION_BITS,
    MANTISSA_MAX,
    QUANTIZE_INPUT_DTYPES,
    SCALE_BIAS,
    check_group_size,
    describe,
)


def quantize(
    w: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> tuple[torch.Tensor, torch.Tensor]:
    """FP32/BF16/FP16 -> MXINT8 ``(mantissa int8 of w's shape, scales uint8)``.

    Groups run along the last dimension, so ``w.shape[-1]`` must divide by ``group_size``;
    ``scales`` has shape ``(*w.shape[:-1], w.shape[-1] // group_size)``. Per group the scale is
    the largest float32 exponent after rounding to bf16 and flushing magnitudes below 2^-126.
    Finite float32 values beyond bf16's range (|w| > 3.39e38) saturate to bf16's largest, as
    OCP MX conversions do; inf and NaN have no encoding and raise.
    """
    if not isinstance(w, torch.Tensor) or w.dtype not in QUANTIZE_INPUT_DTYPES:
        raise TypeError(f"w must be a float32, bfloat16 or float16 tensor, got {describe(w)}")
    check_group_size(group_size)
    if w.dim() == 0:
        raise ValueError("w must have at least one dimension, got a 0-d tensor")
    if w.shape[-1] % group_size != 0:
        raise ValueError(
            f"w's last dimension ({w.shape[-1]}) must be a multiple of group_size={group_size}"
        )
    if not torch.isfinite(w).all():
        raise ValueError("w contains inf or NaN, which MXINT8 cannot encode")

    # Clamped before the bf16 cast, which would round 3.4e38 up to inf (and the group to NaN)
    x = w.float().clamp(-BF16_MAX, BF16_MAX).to(torch.bfloat16).float().reshape(-1, group_size)
    x = torch.where(x.abs() < FLOAT32_SMALLEST_NORMAL, 0.0, x)
    biased_exponent = (x.view(torch.int32) >> 23) & 0xFF
    scale = biased_exponent.amax(dim=1, keepdim=True)
    step = torch.exp2((scale - SCALE_BIAS).float())  # exact powers of two, 2^-127 when all-zero
    magnitude = torch.round(x.abs() / step * 2**MANTISSA_FRACTION_BITS).clamp(0, MANTISSA_MAX)
    mantissa = torch.where(x < 0, -magnitude, magnitude).to(torch.int8)
    scales_shape = (*w.shape[:-1], w.shape[-1] // group_size)
    return mantissa.reshape(w.shape), scale.to(torch.uint8).reshape(scales_shape)
