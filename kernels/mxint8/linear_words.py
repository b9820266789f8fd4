"""The fused linear's main loop on CUDA: the weight read as int32 words of four mantissas.

Each word is dequantized by inline assembly into two bf16 pairs (linear_tile.dequantize_words):
bytes 0-1 and bytes 2-3. The pairs of every word form two weight tiles whose K runs 4w, 4w+1
and 4w+2, 4w+3; each meets x gathered at the same K, so the product is the full W @ x^T while
no value is ever moved between registers. Needs groups of >= 4 values (a word shares a scale)
and BLOCK_K >= 32 (each dot spans >= 16 of K).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.linear_tile import (
    USUAL_SCALE_MAX,
    USUAL_SCALE_MIN,
    bf16_step_pair,
    dequantize_words,
    expand_groups,
    load_scales,
    pairs_to_bf16,
)

_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)


@triton.jit
def accumulate_words(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    offs_m,
    offs_n,
    k_start,
    k_blocks,
    M,
    N,
    K,
    stride_xm,
    GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """(float32 [BLOCK_N, BLOCK_M] = W[offs_n, ks] @ x[offs_m, ks]^T, usual): the contract of
    linear_kernel's ``_accumulate`` without SIX_STEPS; wrong where ``usual`` is False."""
    WORDS: tl.constexpr = BLOCK_K // 4
    HALF: tl.constexpr = BLOCK_K // 2
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)  # clamped, not masked: see _accumulate
    cols = tl.minimum(offs_m, M - 1).to(tl.int64)
    offs_w = tl.arange(0, WORDS)
    words_ptr = mantissa_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    w_ptrs = words_ptr + rows[:, None] * (K // 4) + (k_start // 4 + offs_w)[None, :]
    # column j of the low tile is K offset 4 * (j // 2) + j % 2; the high tile's is 2 more
    offs_low = 4 * (tl.arange(0, HALF) // 2) + tl.arange(0, HALF) % 2
    x_ptrs = x_ptr + cols[None, :] * stride_xm + (k_start + offs_low)[:, None]
    groups_per_row = K // GROUP_SIZE
    groups: tl.constexpr = (BLOCK_K + GROUP_SIZE - 1) // GROUP_SIZE
    lowest = tl.full((BLOCK_N, groups), 255, tl.int32)
    highest = tl.zeros((BLOCK_N, groups), tl.int32)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    e_next = load_scales(scales_ptr, rows, k_start, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
    for i in range(k_blocks):
        k0 = k_start + i * BLOCK_K
        e = e_next
        k_next = k0 + BLOCK_K
        if EVEN_K:
            k_next = tl.minimum(k_next, K - BLOCK_K)
        e_next = load_scales(scales_ptr, rows, k_next, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
        if EVEN_K:
            words = tl.load(w_ptrs)
            x_low = tl.load(x_ptrs)
            x_high = tl.load(x_ptrs + 2)
        else:
            w_mask = k0 + 4 * offs_w < K  # K is a multiple of 4: words are all in or all out
            x_mask = k0 + offs_low < K
            words = tl.load(w_ptrs, mask=w_mask[None, :], other=0)
            x_low = tl.load(x_ptrs, mask=x_mask[:, None], other=0.0)
            x_high = tl.load(x_ptrs + 2, mask=x_mask[:, None], other=0.0)
        lowest = tl.minimum(lowest, e)
        highest = tl.maximum(highest, e)
        step = expand_groups(bf16_step_pair(e), BLOCK_N, WORDS, GROUP_SIZE // 4)
        low, high = dequantize_words(words, step)
        acc = tl.dot(pairs_to_bf16(low, BLOCK_N, WORDS), x_low.to(tl.bfloat16), acc)
        acc = tl.dot(pairs_to_bf16(high, BLOCK_N, WORDS), x_high.to(tl.bfloat16), acc)
        w_ptrs += WORDS
        x_ptrs += BLOCK_K
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return acc, usual
