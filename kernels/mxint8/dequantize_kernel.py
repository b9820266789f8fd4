"""MXINT8 -> bfloat16 by Triton kernels, bit for bit the reference's six steps.

Two flat elementwise kernels. ``_dequantize_words_kernel`` (on CUDA: power-of-two groups of >= 4
values, 4-byte-aligned mantissas) reads int32 words of four mantissas and, in a block whose
scales all lie in 7..252, builds each value in about three integer instructions (a byte -> float
"magic number", one subtraction, one multiplication by 2^(e - 133), a shared bf16 pack): the
spec's six steps take ~15, which held the H200 at 0.84 of a same-size copy (the issue rate, not
memory). A block that meets any other scale takes the six steps. ``_dequantize_kernel`` (any
group size, and under Triton's interpreter) takes the six steps everywhere. Block sizes per GPU
come from DEQUANTIZE_CONFIGS.
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
# The words kernel's (elements per program, warps) per GPU name, chosen by
# kernels/tools/mxint8_sweep.py (docs/gate-validation/mxint8-session14): on the H200 2048/4 moved
# 0.977 of a same-size copy at 2^28 elements and 0.983 at 2^25 (4096/8: 0.976, 0.980; the six
# steps 0.839, 0.843); on the H100 4096/8 moved 0.983 and 0.982 (2048/4: 0.981, 0.975).
# Other GPUs take the default.
DEQUANTIZE_CONFIGS: dict[str, tuple[int, int]] = {
    "NVIDIA H200": (2048, 4),
    "NVIDIA H100 80GB HBM3": (4096, 8),
}
DEQUANTIZE_WORDS_DEFAULT = (2048, 4)
_USUAL_SCALE_MIN = tl.constexpr(7)  # below, v/64 * 2^(e-127) can be a bf16 subnormal
_USUAL_SCALE_MAX = tl.constexpr(252)  # above, v * 2^(e-133) can overflow a float32 step
_SIGN_BITS = tl.constexpr(-0x7F7F7F80)  # 0x80808080 as an int32: each byte's top bit
_LOW_BITS = tl.constexpr(0x7F7F7F7F)
_MAGIC = tl.constexpr(0x4B000000)  # float32 2^23: a byte u in its low bits reads 2^23 + u
_MAGIC_OFFSET = tl.constexpr(8388736.0)  # 2^23 + 128: (2^23 + v + 128) - it = v, exactly


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


@triton.jit
def _usual_value_bits(biased, step, SHIFT: tl.constexpr):
    """float32 bits of v * step for the byte at SHIFT of ``biased`` words (bytes hold v + 128)."""
    value = (((biased >> SHIFT) & 0xFF) | _MAGIC).to(tl.float32, bitcast=True) - _MAGIC_OFFSET
    return (value * step).to(tl.int32, bitcast=True)


@triton.jit
def _six_step_value_bits(words, e, SHIFT: tl.constexpr):
    """float32 bits (bf16 in the top half) of the spec's six steps for the byte at SHIFT."""
    return dequantize_bits((words << (24 - SHIFT)) >> 24, e) << 16


@triton.jit
def _bf16_pair(low, high):
    """int32 holding the top halves of float32 bits ``low`` (bits 0-15) and ``high``."""
    return ((low >> 16) & 0xFFFF) | (high & -0x10000)


@triton.jit
def _dequantize_words_kernel(
    mantissa_ptr,
    scales_ptr,
    out_ptr,
    n_groups,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """A (groups, words) tile of BLOCK_SIZE values: int32 words of four mantissas in, two int32
    words of bf16 pairs out per word. GROUP_SIZE: a power of two, >= 4, <= BLOCK_SIZE."""
    WORDS: tl.constexpr = GROUP_SIZE // 4  # words per group
    GROUPS: tl.constexpr = BLOCK_SIZE // GROUP_SIZE
    first = tl.program_id(0).to(tl.int64) * GROUPS
    rows = tl.arange(0, GROUPS)
    in_range = rows < n_groups - first
    groups = first + rows
    e = tl.load(scales_ptr + groups, mask=in_range, other=127).to(tl.int32)
    words_ptr = mantissa_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    offsets = groups[:, None] * WORDS + tl.arange(0, WORDS)[None, :]
    words = tl.load(words_ptr + offsets, mask=in_range[:, None], other=0)
    unusual = (e < _USUAL_SCALE_MIN) | (e > _USUAL_SCALE_MAX)
    if tl.max(unusual.to(tl.int32)) == 0:
        # bytes 0x80 (v = -128, the spec's +0.0) become 0x00, then every top bit flips: v + 128
        minus_128 = ~((words & _LOW_BITS) + _LOW_BITS) & words & _SIGN_BITS
        biased = words ^ minus_128 ^ _SIGN_BITS
        step = ((e - 6) << 23).to(tl.float32, bitcast=True)[:, None]  # 2^(e - 133), exact
        # v * 2^(e - 133) = v/64 * 2^(e - 127) has <= 7 significant bits: bf16 exactly
        low = _bf16_pair(_usual_value_bits(biased, step, 0), _usual_value_bits(biased, step, 8))
        high = _usual_value_bits(biased, step, 16)
        high = _bf16_pair(high, _usual_value_bits(biased, step, 24))
    else:
        e_rows = e[:, None]
        low = _six_step_value_bits(words, e_rows, 0)
        low = _bf16_pair(low, _six_step_value_bits(words, e_rows, 8))
        high = _six_step_value_bits(words, e_rows, 16)
        high = _bf16_pair(high, _six_step_value_bits(words, e_rows, 24))
    pairs = tl.reshape(tl.join(low, high), (GROUPS, 2 * WORDS))
    out_words = out_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    out_offsets = groups[:, None] * (2 * WORDS) + tl.arange(0, 2 * WORDS)[None, :]
    tl.store(out_words + out_offsets, pairs, mask=in_range[:, None])


def words_fit(mantissa: torch.Tensor, group_size: int) -> bool:
    """Whether the words kernel can take these (contiguous) mantissas: power-of-two groups of
    whole int32 words, mantissas starting on a word."""
    return is_power_of_two(group_size) and group_size >= 4 and mantissa.data_ptr() % 4 == 0


def uses_words(mantissa: torch.Tensor, group_size: int) -> bool:
    """Whether ``dequantize`` runs the words kernel: on CUDA where it fits. Under Triton's
    interpreter (CPU) it keeps the six-step kernel, whose counted instructions the CPU suite's
    gate holds (tests run the words kernel there through ``launch_dequantize_words``)."""
    return mantissa.device.type == "cuda" and words_fit(mantissa, group_size)


def words_config(device: torch.device) -> tuple[int, int]:
    """(elements per program, warps) of the words kernel on ``device``: DEQUANTIZE_CONFIGS."""
    if device.type != "cuda":
        return DEQUANTIZE_WORDS_DEFAULT
    return DEQUANTIZE_CONFIGS.get(torch.cuda.get_device_name(device), DEQUANTIZE_WORDS_DEFAULT)


def launch_dequantize_words(
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    out: torch.Tensor,
    group_size: int,
    block_size: int,
    num_warps: int,
) -> None:
    """The words kernel on contiguous, non-empty ``mantissa`` (``uses_words``) into ``out``."""
    block_size = max(block_size, group_size)
    n_groups = mantissa.numel() // group_size
    grid = (triton.cdiv(n_groups, block_size // group_size),)
    _dequantize_words_kernel[grid](
        mantissa,
        scales,
        out,
        n_groups,
        GROUP_SIZE=group_size,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )


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

    On CUDA tensors it launches a Triton kernel (``uses_words`` says which). On CPU tensors it
    runs the six-step kernel through Triton's interpreter when ``TRITON_INTERPRET=1`` was set
    before import, else the reference.
    """
    check_dequantize_inputs(mantissa, scales, group_size)
    if not triton_available_for(mantissa.device):
        return dequantize_reference(mantissa, scales, group_size)
    out = torch.empty(mantissa.shape, dtype=torch.bfloat16, device=mantissa.device)
    if mantissa.numel() == 0:
        return out
    mantissa, scales = mantissa.contiguous(), scales.contiguous()
    if uses_words(mantissa, group_size):
        block_size, num_warps = words_config(mantissa.device)
        launch_dequantize_words(mantissa, scales, out, group_size, block_size, num_warps)
    else:
        launch_dequantize(mantissa, scales, out, group_size)
    return out
