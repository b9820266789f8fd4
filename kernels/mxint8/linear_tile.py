"""Dequantizing one weight tile of the fused linear in registers, bit for bit the spec's steps.

``dequantize_tile`` takes a fast path for scales 7..252 (``dequantize_usual``) or the spec's
six steps (``dequantize_bits``) for any scale; the kernel picks per program. On CUDA the fast
path is ``dequantize_words`` instead: four values from one int32 word by inline assembly.
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


# One int32 word of four int8 mantissas ($2) and its group's 2^(e-133) as a bf16 pair ($3) ->
# four bf16 weights as two bf16 pairs: $0 holds bytes 0 and 1, $1 bytes 2 and 3.
# 1. Bytes 0x80 (v = -128, which the spec reads as +0.0) become 0x00: a byte is 0x80 exactly
#    when its low 7 bits are 0 (so adding 0x7F leaves bit 7 clear) and its bit 7 is set.
# 2. Each byte b goes under a 0x43 byte: bf16 0x43bb. With bb's top bit cleared that is
#    128 + (b & 0x7F); with only its top bit kept, 128 or 256: the difference is the int8 value
#    v, exact (Triton's own int8 -> bf16 conversion works the same way).
# 3. v * 2^(e-133) = v/64 * 2^(e-127), exact for scales 7..252: 7 significant bits at most.
# Steps 1-2 for the bytes of $2, as bf16 pairs lo (bytes 0-1) and hi (bytes 2-3); the steps after
BYTES_TO_BF16_PAIRS = """{
.reg .b32 y, w, lo, hi, lo_top, hi_top;
and.b32 y, $2, 0x7f7f7f7f;
add.u32 y, y, 0x7f7f7f7f;
not.b32 y, y;
and.b32 y, y, $2;
and.b32 y, y, 0x80808080;
xor.b32 w, $2, y;
prmt.b32 lo, w, 0x43, 0x4140;
prmt.b32 hi, w, 0x43, 0x4342;
and.b32 lo_top, lo, 0xff80ff80;
and.b32 hi_top, hi, 0xff80ff80;
and.b32 lo, lo, 0xff7fff7f;
and.b32 hi, hi, 0xff7fff7f;
sub.bf16x2 lo, lo, lo_top;
sub.bf16x2 hi, hi, hi_top;
"""
_WORD_DEQUANTIZE_ASM = tl.constexpr(
    BYTES_TO_BF16_PAIRS + "mul.rn.bf16x2 $0, lo, $3;\nmul.rn.bf16x2 $1, hi, $3;\n}"
)


@triton.jit
def dequantize_words(words, step_pair):
    """(bytes 0-1, bytes 2-3) of int32 ``words`` of four int8 mantissas sharing a scale in
    7..252, dequantized as bf16 pairs in int32: the spec's values in ~3 instructions each.

    CUDA only (inline assembly; Triton's interpreter runs none). ``step_pair``: ``bf16_step_pair``.
    """
    return tl.inline_asm_elementwise(
        _WORD_DEQUANTIZE_ASM,
        "=r,=r,r,r",
        [words, step_pair],
        dtype=(tl.int32, tl.int32),
        is_pure=True,
        pack=1,
    )


@triton.jit
def bf16_step_pair(e):
    """int32 holding bf16 2^(e-133) twice (the weight of a mantissa's last bit), scales 7..252."""
    bits = (e - 6) << 7  # bf16 exponent field e - 133 + 127
    return bits | (bits << 16)


@triton.jit
def pairs_to_bf16(pairs, BLOCK_N: tl.constexpr, WORDS: tl.constexpr):
    """bf16 [BLOCK_N, 2 * WORDS] from int32 bf16 pairs [BLOCK_N, WORDS], low half first."""
    low = pairs.to(tl.int16)
    high = (pairs >> 16).to(tl.int16)
    both = tl.join(low, high).to(tl.bfloat16, bitcast=True)
    return tl.reshape(both, (BLOCK_N, 2 * WORDS))


@triton.jit
def dequantize_tile(
    v,
    e,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    SIX_STEPS: tl.constexpr,
):
    """bf16 [BLOCK_N, BLOCK_K] from int8 mantissas and int32 per-group scales [BLOCK_N, groups].

    SIX_STEPS takes the spec's steps, right for any scale; otherwise scales must lie in 7..252.
    """
    e = expand_groups(e, BLOCK_N, BLOCK_K, GROUP_SIZE)
    if SIX_STEPS:
        w = dequantize_bits(v.to(tl.int32), e).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        w = dequantize_usual(v.to(tl.int32), e)
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
