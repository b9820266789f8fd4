"""The fused MXINT8 linear kernel: ``out = x @ W^T + bias``, W read as MXINT8 tile by tile.

Each program owns one [BLOCK_M, BLOCK_N] output tile, or its 1/SPLIT_K share of K when K is split
so that every SM streams weights. The weight tile is dequantized in registers and is the left
operand of ``tl.dot`` (float32 accumulator): on GPUs read as int32 words of four mantissas and
converted by inline assembly (linear_words.py), under Triton's interpreter value by value
(``_accumulate`` here, with linear_tile.py); a program that meets a scale outside 7..252 redoes
its share with the spec's six steps. Launched by linear_launch.py;
docs/NOTES.md ("Fused MXINT8 linear") explains the design and its measurements.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.linear_tile import (
    USUAL_SCALE_MAX,
    USUAL_SCALE_MIN,
    dequantize_tile,
    load_scales,
    widen_bf16,
)
from kernels.mxint8.linear_words import accumulate_words

_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)


@triton.jit
def _tile_coordinates(
    pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr
):
    """(pid_m, pid_n) of tile ``pid``: runs of GROUP_M row tiles share each weight tile in L2."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_band = GROUP_M * tiles_n
    first_m = (pid // per_band) * GROUP_M
    band_height = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_band) % band_height
    pid_n = (pid % per_band) // band_height
    return pid_m, pid_n


@triton.jit
def _accumulate(
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
    SIX_STEPS: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """(float32 [BLOCK_N, BLOCK_M] = W[offs_n, ks] @ x[offs_m, ks]^T, usual) for ``k_blocks``
    blocks ``ks`` of K from ``k_start``, masked at K unless EVEN_K.

    ``usual`` says whether every scale met lies in 7..252; if not, and SIX_STEPS is off, the
    result is wrong and the caller redoes it with SIX_STEPS.
    """
    # The weight tile is the dot's left operand: Hopper's wgmma then takes it from the registers
    # it was dequantized in, and a batch of 1-16 pads only the narrow right operand.
    # Rows past N and M repeat the last one instead of being masked (their results are never
    # stored), which keeps the loads unmasked and vectorized; int64 as N * K can pass 2^31.
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)
    cols = tl.minimum(offs_m, M - 1).to(tl.int64)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    w_ptrs = mantissa_ptr + rows[:, None] * K + offs_k[None, :]
    x_ptrs = x_ptr + cols[None, :] * stride_xm + offs_k[:, None]
    groups_per_row = K // GROUP_SIZE
    groups: tl.constexpr = (BLOCK_K + GROUP_SIZE - 1) // GROUP_SIZE  # scale columns a tile reads
    lowest = tl.full((BLOCK_N, groups), 255, tl.int32)
    highest = tl.zeros((BLOCK_N, groups), tl.int32)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    # Triton pipelines the loads that feed the dot through shared memory, but not loads of
    # under 4 bytes a thread such as these scales: fetch them a block ahead by hand.
    e_next = load_scales(scales_ptr, rows, k_start, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
    for i in range(k_blocks):
        k0 = k_start + i * BLOCK_K
        e = e_next
        k_next = k0 + BLOCK_K
        if EVEN_K:
            k_next = tl.minimum(k_next, K - BLOCK_K)  # stays inside the tensor, no mask needed
        e_next = load_scales(scales_ptr, rows, k_next, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
        if EVEN_K:
            v = tl.load(w_ptrs)
            x_t = tl.load(x_ptrs)
        else:
            k_mask = k0 + tl.arange(0, BLOCK_K) < K
            v = tl.load(w_ptrs, mask=k_mask[None, :], other=0)
            x_t = tl.load(x_ptrs, mask=k_mask[:, None], other=0.0)
        lowest = tl.minimum(lowest, e)
        highest = tl.maximum(highest, e)
        w = dequantize_tile(v, e, BLOCK_N, BLOCK_K, GROUP_SIZE, SIX_STEPS)
        x_t = x_t.to(tl.bfloat16)  # float16 activations meet bf16 weights on bf16 tensor cores
        if INTERPRETED:
            acc = tl.dot(widen_bf16(w), widen_bf16(x_t), acc)
        else:
            acc = tl.dot(w, x_t, acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return acc, usual


@triton.jit
def store_output(out_ptr, bias_ptr, acc, offs_m, offs_n, M, N, stride_om, HAS_BIAS: tl.constexpr):
    """out[offs_m, offs_n] = (acc^T + bias) in out's dtype; ``acc`` is [BLOCK_N, BLOCK_M]."""
    n_mask = offs_n < N
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[:, None]
    out_ptrs = out_ptr + offs_m.to(tl.int64)[None, :] * stride_om + offs_n[:, None]
    mask = n_mask[:, None] & (offs_m[None, :] < M)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def finish_split(
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
    HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """Store this split's partial tile; the tile's last split to arrive sums all and stores.

    The sum runs in split order, whichever program arrives last, so results are deterministic.
    """
    num_tiles = tl.num_programs(0)
    local = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    tile_size: tl.constexpr = BLOCK_N * BLOCK_M
    tl.store(workspace_ptr + (pid_k * num_tiles + tile).to(tl.int64) * tile_size + local, acc)
    tl.debug_barrier()  # every thread's part is written before the release below
    arrived = tl.atomic_add(counters_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:
        total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for split in tl.static_range(SPLIT_K):
            slot = workspace_ptr + (split * num_tiles + tile).to(tl.int64) * tile_size
            total += tl.load(slot + local, cache_modifier=".cg")  # from L2: L1 may be stale
        store_output(out_ptr, bias_ptr, total, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
        tl.atomic_xchg(counters_ptr + tile, 0, sem="relaxed", scope="gpu")  # for the next launch


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def mxint8_linear_kernel(
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
    """One [BLOCK_M, BLOCK_N] output tile, or its 1/SPLIT_K share of K. Grid: (tiles, SPLIT_K).

    Each program covers ``k_blocks`` blocks of K; the interpreter, which needs a Python int as
    the loop bound, gets it as K_BLOCKS_INTERPRETED instead. ``M_BUCKET`` only keys the
    autotuner. Split programs meet through ``workspace`` and ``counters``, which hold zeros
    between launches: the last program of each tile resets its counter.
    """
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coordinates(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # (the interpreter turns a plain assignment of the int into a tensor: pass it directly)
    k_start = pid_k * (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks) * BLOCK_K
    operands = (x_ptr, mantissa_ptr, scales_ptr, offs_m, offs_n, k_start)
    operands += (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks, M, N, K)
    WORDS: tl.constexpr = not INTERPRETED and GROUP_SIZE >= 4 and BLOCK_K >= 32
    if WORDS:
        acc, usual = accumulate_words(
            *operands, stride_xm, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K
        )
    else:
        acc, usual = _accumulate(
            *operands, stride_xm, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, False, INTERPRETED
        )
    if not usual:  # a scale outside 7..252 in this program's share: redo it with the six steps
        acc, usual = _accumulate(
            *operands, stride_xm, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, True, INTERPRETED
        )
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
            BLOCK_M,
        )
