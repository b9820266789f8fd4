"""The fused linear for batches of a few rows: a GEMV on the CUDA cores, no tensor cores.

At batch 1 the tile kernel (linear_kernel.py) spends its issue slots turning bytes into bf16
operands for a tensor core that then multiplies mostly padding. Here each program streams
BLOCK_N weight rows over its 1/SPLIT_K share of K as int32 words of four mantissas (16-byte
loads, fetched one block ahead in registers, read once: evict-first), turns each byte into the
float32 value v by a float "magic number" (one byte permute and one subtraction), multiplies it
by bf16 x (exact in float32) and sums per word; each word's sum is scaled by its group's
2^(e - 133) (exact), so the result is the dequantized weight times x, accumulated in float32.
x is read as int64 words of four bf16 values. A program that meets a scale outside 7..252
redoes its share with the spec's six steps. The split-K partial tiles meet as in the tile
kernel (``finish_split``): no second launch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.dequantize_kernel import dequantize_bits
from kernels.mxint8.linear_kernel import finish_split, store_output
from kernels.mxint8.linear_tile import USUAL_SCALE_MAX, USUAL_SCALE_MIN, expand_groups, load_scales

_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)
_SIGN_BITS = tl.constexpr(-0x7F7F7F80)  # 0x80808080 as an int32: each byte's top bit
_LOW_BITS = tl.constexpr(0x7F7F7F7F)
_MAGIC = tl.constexpr(0x4B000000)  # float32 2^23: a byte u in its low bits reads 2^23 + u
_MAGIC_OFFSET = tl.constexpr(8388736.0)  # 2^23 + 128: (2^23 + v + 128) - it = v, exactly


@triton.jit
def _byte_value(biased, SHIFT: tl.constexpr):
    """float32 v of the byte at SHIFT of ``biased`` words, whose bytes hold v + 128."""
    return (((biased >> SHIFT) & 0xFF) | _MAGIC).to(tl.float32, bitcast=True) - _MAGIC_OFFSET


@triton.jit
def _exact_byte_value(words, e, SHIFT: tl.constexpr):
    """float32 of the bf16 the spec's six steps give for the byte at SHIFT, any scale."""
    v = (words << (24 - SHIFT)) >> 24  # sign-extended int8
    return (dequantize_bits(v, e) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _bf16_pair(half, HIGH: tl.constexpr):
    """float32 of the low (HIGH false) or high bf16 of int32 ``half``."""
    if HIGH:
        bits = half & -0x10000
    else:
        bits = half << 16
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _word_products(words, e, x_words, SIX_STEPS: tl.constexpr):
    """[BLOCK_N, WORDS]: sum over each word's four values of weight * x, unscaled unless
    SIX_STEPS (then ``e`` holds each word's scale and the weights are the spec's)."""
    x_low = x_words.to(tl.int32)
    x_high = (x_words >> 32).to(tl.int32)
    xs = (_bf16_pair(x_low, False), _bf16_pair(x_low, True))
    xs += (_bf16_pair(x_high, False), _bf16_pair(x_high, True))
    if SIX_STEPS:
        total = _exact_byte_value(words, e, 0) * xs[0]
        total += _exact_byte_value(words, e, 8) * xs[1]
        total += _exact_byte_value(words, e, 16) * xs[2]
        total += _exact_byte_value(words, e, 24) * xs[3]
    else:
        # bytes 0x80 (v = -128, the spec's +0.0) become 0x00, then every top bit flips: v + 128
        minus_128 = ~((words & _LOW_BITS) + _LOW_BITS) & words & _SIGN_BITS
        biased = words ^ minus_128 ^ _SIGN_BITS
        total = _byte_value(biased, 0) * xs[0]
        total += _byte_value(biased, 8) * xs[1]
        total += _byte_value(biased, 16) * xs[2]
        total += _byte_value(biased, 24) * xs[3]
    return total


@triton.jit
def _add_block(
    state, words, e, x_words,
    GROUP_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SIX_STEPS: tl.constexpr,
):  # fmt: skip
    """One K block's (words, scales e, x words) into (acc, lowest, highest)."""
    WORDS: tl.constexpr = BLOCK_K // 4
    acc, lowest, highest = state
    lowest = tl.minimum(lowest, e)
    highest = tl.maximum(highest, e)
    if SIX_STEPS:
        full = expand_groups(e, BLOCK_N, WORDS, GROUP_SIZE // 4)
        acc += _word_products(words, full, x_words, True)
    else:
        step = ((e - 6) << 23).to(tl.float32, bitcast=True)  # 2^(e - 133), e in 7..252
        step = expand_groups(step, BLOCK_N, WORDS, GROUP_SIZE // 4)
        acc += _word_products(words, e, x_words, False) * step
    return acc, lowest, highest


@triton.jit
def _gemv_block(
    i, k_start, state, w_ptrs, x_ptrs, scales_ptr, rows, groups_per_row,
    GROUP_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SIX_STEPS: tl.constexpr,
):  # fmt: skip
    """K block ``i`` of ``accumulate_gemv``: (acc, lowest, highest) in, updated out."""
    WORDS: tl.constexpr = BLOCK_K // 4
    words = tl.load(w_ptrs + i * WORDS, eviction_policy="evict_first")  # read once
    k0 = k_start + i * BLOCK_K
    e = load_scales(scales_ptr, rows, k0, groups_per_row, BLOCK_K, GROUP_SIZE, True)
    x_words = tl.load(x_ptrs + i * WORDS)[None, :]
    return _add_block(state, words, e, x_words, GROUP_SIZE, BLOCK_N, BLOCK_K, SIX_STEPS)


@triton.jit
def _gemv_block_prefetched(
    i, k_start, K, state, ahead, w_ptrs, x_ptrs, scales_ptr, rows, groups_per_row,
    GROUP_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SIX_STEPS: tl.constexpr,
):  # fmt: skip
    """``_gemv_block`` on the block's (words, scales) ``ahead``, already loaded, loading the
    next block's (the last block of K again at its end, which L2 still holds)."""
    WORDS: tl.constexpr = BLOCK_K // 4
    words, e = ahead
    k_next = tl.minimum(k_start + (i + 1) * BLOCK_K, K - BLOCK_K)
    words_next = tl.load(w_ptrs + (k_next - k_start) // 4, eviction_policy="evict_first")
    e_next = load_scales(scales_ptr, rows, k_next, groups_per_row, BLOCK_K, GROUP_SIZE, True)
    x_words = tl.load(x_ptrs + i * WORDS)[None, :]
    state = _add_block(state, words, e, x_words, GROUP_SIZE, BLOCK_N, BLOCK_K, SIX_STEPS)
    return state, (words_next, e_next)


@triton.jit
def accumulate_gemv(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    row_x,
    offs_n,
    k_start,
    k_blocks,
    N,
    K,
    stride_xm,
    GROUP_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SIX_STEPS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """(float32 [BLOCK_N] = W[offs_n, ks] @ x[row_x, ks], usual) over ``k_blocks`` blocks of K
    from ``k_start``, every block inside K. Unless SIX_STEPS, wrong where ``usual`` (every
    scale met in 7..252) is False.

    Compiled, Triton pipelines the loads NUM_STAGES - 1 blocks ahead through shared memory
    (cp.async), or with NUM_STAGES 1 the loop fetches the next block into registers itself
    (docs/gate-validation/mxint8-fused-session7 compares them). Interpreted, a while loop:
    ``k_blocks`` may depend on the program id, which Triton's interpreter cannot range over.
    """
    WORDS: tl.constexpr = BLOCK_K // 4
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)  # clamped, not masked: never stored
    offs_w = tl.arange(0, WORDS)
    words_ptr = mantissa_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    w_ptrs = words_ptr + rows[:, None] * (K // 4) + (k_start // 4 + offs_w)[None, :]
    x_words_ptr = x_ptr.to(tl.pointer_type(tl.int64), bitcast=True)
    x_ptrs = x_words_ptr + row_x.to(tl.int64) * (stride_xm // 4) + k_start // 4 + offs_w
    groups_per_row = K // GROUP_SIZE
    groups: tl.constexpr = (BLOCK_K + GROUP_SIZE - 1) // GROUP_SIZE
    acc = tl.zeros((BLOCK_N, WORDS), dtype=tl.float32)
    lowest = tl.full((BLOCK_N, groups), 255, tl.int32)
    highest = tl.zeros((BLOCK_N, groups), tl.int32)
    state = (acc, lowest, highest)
    where = (w_ptrs, x_ptrs, scales_ptr, rows, groups_per_row)
    if INTERPRETED:
        i = 0
        while i < k_blocks:
            state = _gemv_block(i, k_start, state, *where, GROUP_SIZE, BLOCK_N, BLOCK_K, SIX_STEPS)
            i += 1
    elif NUM_STAGES == 1:  # the next block fetched into registers by hand instead
        words = tl.load(w_ptrs, eviction_policy="evict_first")
        e = load_scales(scales_ptr, rows, k_start, groups_per_row, BLOCK_K, GROUP_SIZE, True)
        ahead = (words, e)
        for i in range(k_blocks):
            state, ahead = _gemv_block_prefetched(
                i, k_start, K, state, ahead, *where, GROUP_SIZE, BLOCK_N, BLOCK_K, SIX_STEPS
            )
    else:
        for i in tl.range(0, k_blocks, num_stages=NUM_STAGES):
            state = _gemv_block(i, k_start, state, *where, GROUP_SIZE, BLOCK_N, BLOCK_K, SIX_STEPS)
    acc, lowest, highest = state
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return tl.sum(acc, axis=1), usual


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def mxint8_gemv_kernel(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    bias_ptr,
    out_ptr,
    workspace_ptr,
    counters_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_om,
    k_blocks,
    M_BUCKET,
    GROUP_SIZE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    INTERPRETED: tl.constexpr,
    K_BLOCKS_INTERPRETED: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """One row of x times BLOCK_N weight rows, over a 1/SPLIT_K share of K. Grid: (M * tiles
    of N, SPLIT_K).

    The tile kernel's arguments and contract (linear_kernel.py), with bf16 x, rows of x of
    whole int64 words and every split a whole number of BLOCK_K blocks (EVEN_K; the launcher
    checks: ``gemv_fits``). BLOCK_M must be 1; GROUP_M is unused.
    """
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    tiles_n = tl.cdiv(N, BLOCK_N)
    row_x = tile // tiles_n
    offs_n = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_start = pid_k * (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks) * BLOCK_K
    operands = (x_ptr, mantissa_ptr, scales_ptr, row_x, offs_n, k_start)
    operands += (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks, N, K, stride_xm)
    acc, usual = accumulate_gemv(
        *operands, GROUP_SIZE, BLOCK_N, BLOCK_K, False, NUM_STAGES, INTERPRETED
    )
    if not usual:  # a scale outside 7..252 in this program's share: redo it with the six steps,
        # in blocks of 64 so that this rare path does not raise the registers of the usual one
        SIX_K: tl.constexpr = min(BLOCK_K, 64)
        six = (x_ptr, mantissa_ptr, scales_ptr, row_x, offs_n, k_start)
        six += ((K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks) * (BLOCK_K // SIX_K),)
        acc, usual = accumulate_gemv(
            *six, N, K, stride_xm, GROUP_SIZE, BLOCK_N, SIX_K, True, NUM_STAGES, INTERPRETED
        )
    acc = acc[:, None]  # [BLOCK_N, 1]: the tile kernel's output tile with BLOCK_M = 1
    offs_m = row_x + tl.arange(0, 1)
    if SPLIT_K == 1:
        store_output(out_ptr, bias_ptr, acc, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
    else:
        finish_split(
            out_ptr,
            bias_ptr,
            workspace_ptr,
            counters_ptr,
            acc,
            tile,
            pid_k,
            offs_m,
            offs_n,
            M,
            N,
            stride_om,
            HAS_BIAS,
            SPLIT_K,
            BLOCK_N,
            1,
        )
