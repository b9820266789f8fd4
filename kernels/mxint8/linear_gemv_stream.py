"""The batch-1 GEMV as a stream: a persistent grid of a few programs per SM that share out the
weight evenly, whole K blocks at a time, whatever the shape.

With one program per (row block, K split) the H100 runs 448 programs for a 14336 x 4096 weight
on 132 SMs: 3 or 4 each, so the SMs that got 4 set the time (measured: 85 % of the SMs' time
used). Here the M * row-block * K-block iterations are cut into ``num_programs`` equal ranges;
a program walks its range (linear_gemv.accumulate_gemv on each row block it meets) and stores a
row block it covered whole; a row block shared by several programs is summed, in program
order (so deterministically), by the last of them to arrive, as the split-K tile kernel does:
no second launch. Each program keeps two partial slots in ``workspace`` (the row block it
starts in and the one it ends in); ``counters`` hold one arrival count per row block and are
zero between launches.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.linear_gemv import accumulate_gemv
from kernels.mxint8.linear_kernel import store_output


@triton.jit
def _first_program(it, total, programs):
    """The program whose range [p * total // programs, (p + 1) * total // programs) holds it."""
    return ((it + 1) * programs + total - 1) // total - 1


@triton.jit
def _row_block(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    row_x,
    offs_n,
    kb_start,
    kb_count,
    N,
    K,
    stride_xm,
    GROUP_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """float32 [BLOCK_N]: ``kb_count`` K blocks from block ``kb_start`` of one row block."""
    operands = (x_ptr, mantissa_ptr, scales_ptr, row_x, offs_n, kb_start * BLOCK_K, kb_count)
    operands += (N, K, stride_xm)
    acc, usual = accumulate_gemv(
        *operands, GROUP_SIZE, BLOCK_N, BLOCK_K, False, NUM_STAGES, INTERPRETED
    )
    if not usual:  # a scale outside 7..252: redo it with the six steps, in blocks of 64
        SIX_K: tl.constexpr = min(BLOCK_K, 64)
        six = (x_ptr, mantissa_ptr, scales_ptr, row_x, offs_n, kb_start * BLOCK_K)
        six += (kb_count * (BLOCK_K // SIX_K),)
        six += (N, K, stride_xm)
        acc, usual = accumulate_gemv(
            *six, GROUP_SIZE, BLOCK_N, SIX_K, True, NUM_STAGES, INTERPRETED
        )
    return acc


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def mxint8_gemv_stream_kernel(
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
    """The tile kernel's arguments (linear_kernel.py) with ``k_blocks`` = K // BLOCK_K (K a
    multiple of BLOCK_K), bf16 x in whole int64 words, BLOCK_M 1 and SPLIT_K 1; ``workspace``
    holds 2 * BLOCK_N float32 per program, ``counters`` one int32 per (row of x, row block).
    Grid: (programs,)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    row_blocks = tl.cdiv(N, BLOCK_N)
    blocks = K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks  # K blocks per row block
    total = M * row_blocks * blocks
    it = pid * total // programs
    end = (pid + 1) * total // programs
    first_segment = it // blocks
    local = tl.arange(0, BLOCK_N)
    while it < end:
        segment = it // blocks  # (row of x, row block)
        kb_start = it - segment * blocks
        kb_count = tl.minimum(blocks - kb_start, end - it)
        row_x = segment // row_blocks
        offs_n = (segment % row_blocks) * BLOCK_N + local
        acc = _row_block(
            x_ptr, mantissa_ptr, scales_ptr, row_x, offs_n, kb_start, kb_count,
            N, K, stride_xm, GROUP_SIZE, BLOCK_N, BLOCK_K, NUM_STAGES, INTERPRETED,
        )  # fmt: skip
        offs_m = row_x + tl.arange(0, 1)  # acc[:, None] is the tile kernel's output tile
        first = _first_program(segment * blocks, total, programs)
        last = _first_program(segment * blocks + blocks - 1, total, programs)
        if first == last:  # this program covered the row block whole
            store_output(out_ptr, bias_ptr, acc[:, None], offs_m, offs_n, M, N, stride_om, HAS_BIAS)
        else:
            slot = tl.where(segment == first_segment, 0, 1)
            tl.store(workspace_ptr + (2 * pid + slot) * BLOCK_N + local, acc)
            tl.debug_barrier()  # every thread's part is written before the release below
            arrived = tl.atomic_add(counters_ptr + segment, 1, sem="acq_rel", scope="gpu")
            if arrived == last - first:
                total_acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
                q = first
                while q <= last:  # in program order: deterministic
                    q_slot = tl.where((q * total // programs) // blocks == segment, 0, 1)
                    part = workspace_ptr + (2 * q + q_slot) * BLOCK_N + local
                    total_acc += tl.load(part, cache_modifier=".cg")  # from L2: L1 may be stale
                    q += 1
                store_output(
                    out_ptr, bias_ptr, total_acc[:, None], offs_m, offs_n, M, N, stride_om, HAS_BIAS
                )
                tl.atomic_xchg(counters_ptr + segment, 0, sem="relaxed", scope="gpu")
        it += kb_count
