"""Dequantizing one weight tile of the fused linear in registers, bit for bit the spec's steps.

``dequantize_tile`` takes a fast path for scales 7..252 (``dequantize_usual``) or the spec's
six steps (``dequantize_bits``) for any scale; the kernel picks per program.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.dequantize_kernel import dequantize_bits

# Scales whose values `dequantize_usual` rebuilds bit for bit in a few instructions. A program
# that meets any other scale redoes its share with the spec's six steps (`dequantize_bits`).
USUAL_SCALE_MIN = 7  # below, v/64 * 2^(e-127) can be a bf16 subnormal
USUAL_SCALE_MAX = 252  # above, the float32 "magic" exponent e + 2 would pass 254
_NEUTRAL_SCALE = tl.constexpr(127)  # read for groups past K: a usual scale, keeps tails fast


@triton.jit
def dequantize_usual(v, e):
    """bf16 of the spec's six steps for int32 mantissas ``v`` and scales ``e`` in 7..252.

    There the six steps give ``v / 64 * 2^(e - 127)`` (+0.0 for v = -128), which this builds in
    about six instructions a value instead of ~15: the mantissa goes into the top fraction bits
    of a float32 whose exponent comes from the scale, and one subtraction removes the offset.
    tests/test_mxint8_linear.py checks it against the six steps on every usual (v, e) pair.
    """
    # bits (e + 2) << 23 | (v + 128) << 15 are the float32 2^(e-125) * (1 + (v + 128) / 256)
    magic = ((e + 2) << 23) | (128 << 15)
    shifted = (v * 32768 + magic).to(tl.float32, bitcast=True)
    offset = magic.to(tl.float32, bitcast=True)
    # Both lie in one binade, so the difference v * 2^(e-133) is exact, and so is the cast to
    # bf16 (7 significant bits at most, a float32 normal since e >= 7). v = -128 alone gives
    # the smallest shifted value, 2^(e-125), and the spec wants +0.0 there. (Testing the float
    # rather than v spares the byte extraction LLVM adds to test v == -128.)
    lowest = (magic - (128 << 15)).to(tl.float32, bitcast=True)
    w = tl.where(shifted == lowest, 0.0, shifted - offset)
    return w.to(tl.bfloat16)


@triton.jit
def expand_groups(e, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Per-group scales [BLOCK_N, groups] -> one per value [BLOCK_N, BLOCK_K] (or [BLOCK_N, 1])."""
    if GROUP_SIZE >= BLOCK_K:
        full = e  # one group spans the tile: [BLOCK_N, 1] broadcasts along K
    else:
        groups: tl.constexpr = BLOCK_K // GROUP_SIZE
        full = tl.broadcast_to(e[:, :, None], (BLOCK_N, groups, GROUP_SIZE))
        full = tl.reshape(full, (BLOCK_N, BLOCK_K))
    return full


@triton.jit
def dequantize_tile(
    v,
    e,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    SIX_STEPS: tl.constexpr,
):
    """bf16 [BLOCK_N, BLOCK_K] from int32 mantissas and int32 per-group scales [BLOCK_N, groups].

    SIX_STEPS takes the spec's steps, right for any scale; otherwise scales must lie in 7..252.
    """
    e = expand_groups(e, BLOCK_N, BLOCK_K, GROUP_SIZE)
    if SIX_STEPS:
        w = dequantize_bits(v, e).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        w = dequantize_usual(v, e)
    return w


@triton.jit
def load_scales(
    scales_ptr,
    rows,
    k0,
    groups_per_row,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """int32 scales of the groups in columns [k0, k0 + BLOCK_K) of ``rows``: [BLOCK_N, groups]."""
    if GROUP_SIZE >= BLOCK_K:
        offs_g = k0 // GROUP_SIZE + tl.arange(0, 1)
    else:
        offs_g = k0 // GROUP_SIZE + tl.arange(0, BLOCK_K // GROUP_SIZE)
    ptrs = scales_ptr + rows[:, None] * groups_per_row + offs_g[None, :]
    if EVEN_K:
        e = tl.load(ptrs)
    else:
        e = tl.load(ptrs, mask=offs_g[None, :] < groups_per_row, other=_NEUTRAL_SCALE)
    return e.to(tl.int32)


@triton.jit
def widen_bf16(t):
    """float32 of bf16 ``t`` by a 16-bit shift, for the interpreter's dot.

    Triton 3.6's interpreter holds bf16 as raw uint16 and its dot multiplies those integers; its
    own bf16 -> float32 cast also gets subnormals wrong. The shift is exact everywhere.
    """
    return (t.to(tl.uint16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
