"""MXINT8 -> bfloat16 by a Triton kernel, bit for bit the reference's six steps.

A flat elementwise kernel: 2048-element blocks (4 warps), one scale load per group when the
group size is a power of two that tiles a block (docs/NOTES.md has the block sweep).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.mxint8.format import (
    DEFAULT_GROUP_SIZE,
    check_dequantize_inputs,
    is_power_of_two,
    triton_available_for,
)
from kernels.mxint8.reference import dequantize_reference

DEQUANTIZE_BLOCK_SIZE = 2048  # elements per Triton program (tuned on the H100: docs/NOTES.md)
DEQUANTIZE_NUM_WARPS = 4


@triton.jit
def dequantize_bits(v, e):
    """bf16 bit patterns (in int32) for int32 mantissas ``v`` and scales ``e``: the spec's steps."""
    sign = tl.where(v < 0, 0x8000, 0)
    a = tl.abs(v)  # in int32, so |-128| = 128
    out = sign | (e << 7) | ((a & 0x3F) << 1)
    bias = sign | (e << 7)
    # Step 6 in float32 on bf16 patterns widened by hand (bf16 -> f32 is a 16-bit shift, which
    # Triton's interpreter gets wrong for subnormals when it converts). The difference is exact
    # in bf16, so its top 16 bits are the result; inf - inf and NaN - inf give a NaN.
    out_f32 = (out << 16).to(tl.float32, bitcast=True)
    bias_f32 = (bias << 16).to(tl.float32, bitcast=True)
    difference = (out_f32 - bias_f32).to(tl.int32, bitcast=True) >> 16
    # bf16 has an implicit leading 1 that MXINT8 lacks: remove it unless the integer bit is set
    return tl.where((a & 0x40) != 0, out, difference)


@triton.jit
def _dequantize_kernel(
    mantissa_ptr,
    scales_ptr,
    out_ptr,
    n_elements,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    GROUP_TILES: tl.constexpr,
):
    # The block start is int64 so tensors past 2^31 elements index correctly; offsets inside a
    # block stay int32.
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    remaining = tl.minimum(n_elements - start, BLOCK_SIZE).to(tl.int32)
    if GROUP_TILES:
        # A (groups, GROUP_SIZE) tile: one scale load per group, broadcast along its row.
        rows = tl.arange(0, BLOCK_SIZE // GROUP_SIZE)
        local = rows[:, None] * GROUP_SIZE + tl.arange(0, GROUP_SIZE)[None, :]
        e = tl.load(scales_ptr + start // GROUP_SIZE + rows, mask=rows * GROUP_SIZE < remaining)
        e = e.to(tl.int32)[:, None]
    else:
        # Any group size: each element finds its group's scale.
        local = tl.arange(0, BLOCK_SIZE)
        e = tl.load(scales_ptr + (start + local) // GROUP_SIZE, mask=local < remaining)
        e = e.to(tl.int32)
    mask = local < remaining
    v = tl.load(mantissa_ptr + start + local, mask=mask, other=0).to(tl.int32)
    bits = dequantize_bits(v, e)
    tl.store(out_ptr + start + local, bits.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)


def uses_group_tiles(group_size: int, block_size: int) -> bool:
    """Power-of-two groups that tile a block take the one-scale-load-per-group path."""
    return is_power_of_two(group_size) and group_size <= block_size


def launch_dequantize(
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    out: torch.Tensor,
    group_size: int,
    block_size: int = DEQUANTIZE_BLOCK_SIZE,
    num_warps: int = DEQUANTIZE_NUM_WARPS,
) -> None:
    """Dequantize contiguous, non-empty ``mantissa`` into ``out`` with the given block shape."""
    n_elements = mantissa.numel()
    _dequantize_kernel[(triton.cdiv(n_elements, block_size),)](
        mantissa,
        scales,
        out,
        n_elements,
        GROUP_SIZE=group_size,
        BLOCK_SIZE=block_size,
        GROUP_TILES=uses_group_tiles(group_size, block_size),
        num_warps=num_warps,
    )


def dequantize(
    mantissa: torch.Tensor, scales: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> torch.Tensor:
    """MXINT8 -> bfloat16 by the Triton kernel: the contract and bits of ``dequantize_reference``.

    On CUDA tensors it launches the Triton kernel. On CPU tensors it runs the same kernel through
    Triton's interpreter when ``TRITON_INTERPRET=1`` was set before import, else the reference.
    """
    check_dequantize_inputs(mantissa, scales, group_size)
    if not triton_available_for(mantissa.device):
        return dequantize_reference(mantissa, scales, group_size)
    out = torch.empty(mantissa.shape, dtype=torch.bfloat16, device=mantissa.device)
    if mantissa.numel() > 0:
        launch_dequantize(mantissa.contiguous(), scales.contiguous(), out, group_size)
    return out
