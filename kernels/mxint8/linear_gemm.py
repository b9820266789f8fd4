"""The fused linear for large batches: x on the left of ``tl.dot``, the weight tile on the right.

Each program owns a [BLOCK_M, BLOCK_N] output tile; per K block it dequantizes its weight tile
once into bf16 (linear_tile.dequantize_tile) and multiplies x [BLOCK_M, BLOCK_K] by its
transpose. With the weight as the right operand Hopper's wgmma reads it from shared memory,
so the dot can run asynchronously while the next tile is dequantized, and a wide BLOCK_M
dequantizes each weight value fewer times. A program that meets a scale outside 7..252 redoes
its tile with the spec's six steps.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.linear_kernel import store_output, tile_coordinates
from kernels.mxint8.linear_tile import (
    USUAL_SCALE_MAX,
    USUAL_SCALE_MIN,
    dequantize_tile,
    expand_groups,
    load_scales,
    widen_bf16,
)

_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)


@triton.jit
def _dequantize_scaled(
    v, e, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr
):
    """bf16 [BLOCK_N, BLOCK_K] of int8 ``v`` and scales ``e`` in 7..252: v * 2^(e - 133), exact
    (a bf16 holds any int8, the power of two only moves the exponent), and +0.0 for v = -128
    as the spec says; Triton converts int8 to bf16 by byte permutes, several values at once."""
    step = ((e - 6) << 7).to(tl.int16).to(tl.bfloat16, bitcast=True)  # bf16 2^(e - 133)
    step = expand_groups(step, BLOCK_N, BLOCK_K, GROUP_SIZE)
    return tl.where(v == -128, 0, v).to(tl.bfloat16) * step


@triton.jit
def _accumulate_gemm(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    offs_m,
    offs_n,
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
    SIX_STEPS: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """(float32 [BLOCK_M, BLOCK_N] = x[offs_m, :] @ W[offs_n, :]^T, usual); unless SIX_STEPS,
    wrong where ``usual`` (every scale met in 7..252) is False."""
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)  # clamped, not masked: never stored
    cols = tl.minimum(offs_m, M - 1).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    w_ptrs = mantissa_ptr + rows[:, None] * K + offs_k[None, :]
    x_ptrs = x_ptr + cols[:, None] * stride_xm + offs_k[None, :]
    groups: tl.constexpr = (BLOCK_K + GROUP_SIZE - 1) // GROUP_SIZE
    lowest = tl.full((BLOCK_N, groups), 255, tl.int32)
    highest = tl.zeros((BLOCK_N, groups), tl.int32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # the scales are too narrow for Triton to pipeline: fetch them a block ahead by hand
    e_next = load_scales(scales_ptr, rows, 0, K // GROUP_SIZE, BLOCK_K, GROUP_SIZE, EVEN_K)
    for i in range(k_blocks):
        k0 = i * BLOCK_K
        e = e_next
        k_next = k0 + BLOCK_K
        if EVEN_K:
            k_next = tl.minimum(k_next, K - BLOCK_K)  # stays inside the tensor, no mask needed
        e_next = load_scales(scales_ptr, rows, k_next, K // GROUP_SIZE, BLOCK_K, GROUP_SIZE, EVEN_K)
        if EVEN_K:
            v = tl.load(w_ptrs)
            x = tl.load(x_ptrs)
        else:
            k_mask = k0 + offs_k < K
            v = tl.load(w_ptrs, mask=k_mask[None, :], other=0)
            x = tl.load(x_ptrs, mask=k_mask[None, :], other=0.0)
        lowest = tl.minimum(lowest, e)
        highest = tl.maximum(highest, e)
        if SIX_STEPS:
            w = dequantize_tile(v, e, BLOCK_N, BLOCK_K, GROUP_SIZE, True)
        else:
            w = _dequantize_scaled(v, e, BLOCK_N, BLOCK_K, GROUP_SIZE)
        x = x.to(tl.bfloat16)
        if INTERPRETED:
            acc = tl.dot(widen_bf16(x), tl.trans(widen_bf16(w)), acc)
        else:
            acc = tl.dot(x, tl.trans(w), acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return acc, usual


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def mxint8_gemm_kernel(
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
):
    """One [BLOCK_M, BLOCK_N] output tile over all of K. Grid: (tiles, 1).

    The tile kernel's arguments (linear_kernel.py); SPLIT_K must be 1 (the launcher's
    ``gemm`` configs have no split), so workspace and counters are unused.
    """
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    operands = (x_ptr, mantissa_ptr, scales_ptr, offs_m, offs_n)
    operands += (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks, M, N, K, stride_xm)
    acc, usual = _accumulate_gemm(
        *operands, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, False, INTERPRETED
    )
    if not usual:  # a scale outside 7..252 in this program's tile: redo it with the six steps,
        # in blocks of 32 so that this rare path does not raise the registers of the usual one
        six = (x_ptr, mantissa_ptr, scales_ptr, offs_m, offs_n)
        six += (tl.cdiv(K, 32), M, N, K, stride_xm)
        acc, usual = _accumulate_gemm(
            *six, GROUP_SIZE, BLOCK_M, BLOCK_N, 32, K % 32 == 0, True, INTERPRETED
        )
    store_output(out_ptr, bias_ptr, tl.trans(acc), offs_m, offs_n, M, N, stride_om, HAS_BIAS)
