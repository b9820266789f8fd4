"""The fused linear for large batches on Hopper: a mixed-input GEMM whose two consumer warp groups
dequantize the weight into shared memory while the tensor cores run.

``out^T[N, M] = W[N, K] @ x^T[K, M]``, one program per tile of 128 weight rows and ``BLOCK_M``
batch rows, in two warp groups of 64 weight rows each (Gluon's warp specialization: two
partitions, so that neither waits for the other at a block-wide barrier):

- the bulk tensor copy engine (TMA) brings each 64-value K block of x (bf16) and of the int8
  mantissas into a ring of ``STAGES`` shared-memory slots; the first warp group starts each
  copy, ``STAGES - 2`` blocks ahead, once both groups have released the slot (its mbarrier
  counts two arrivals);
- each group reads its rows' mantissas of a slot as 16-byte vectors, turns them into bf16
  (linear_mma's inline assembly: exact for scales 7..252), writes them into one of its two bf16
  tiles in shared memory and starts the block's four wgmmas on that tile and x's slot as one
  asynchronous group; the next block is dequantized into the other tile while they run (two
  blocks an iteration: ptxas keeps wgmmas asynchronous only when no path zeroes or rewrites
  what one in flight reads).

Before the loop the program reads every scale of its rows once: if any lies outside 7..252 it
dequantizes with the spec's six steps instead (never for weights the quantizer writes). Needs
a Hopper GPU, bf16 x, K a multiple of 128, groups of 32 or a multiple of 64 values; no K split.
``launch_mma_ws`` is the host side; kernels/tools/mxint8_hopper_build.py builds it for sm_90a on
any machine and reports whether ptxas kept the wgmmas asynchronous.
"""

from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels.mxint8.dequantize_kernel import dequantize_bits
from kernels.mxint8.linear_tile import BYTES_TO_BF16_PAIRS, USUAL_SCALE_MAX, USUAL_SCALE_MIN

BLOCK_N = 128  # weight rows a program: two consumer warp groups of 64
BLOCK_K = 64
CONSUMER_REGISTERS = 232  # setmaxnreg's budget for the second consumer warp group
_ROWS: gl.constexpr = gl.constexpr(BLOCK_N // 2)
_FIRST_ROW: gl.constexpr = gl.constexpr(0)
# A group's 64 weight rows of a block as [64, 4, 16]: each thread 16 values of one row and one
# 16-value chunk of K (16-byte shared-memory reads, one scale a thread and row).
_W_LAYOUT: gl.constexpr = gl.BlockedLayout([1, 1, 16], [8, 4, 1], [4, 1, 1], [2, 1, 0])
_ROWS_LAYOUT: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(2, _W_LAYOUT))
_USUAL_SCALE_MIN = gl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = gl.constexpr(USUAL_SCALE_MAX)
# Four int8 mantissas ($2) and their bf16 steps 2^(e-133) as two pairs ($3, $4) -> four bf16
# weights as two pairs: linear_mma's instance, the same bits.
_FOUR_VALUES_ASM = gl.constexpr(
    BYTES_TO_BF16_PAIRS + "mul.rn.bf16x2 $0, lo, $3;\nmul.rn.bf16x2 $1, hi, $4;\n}"
)


@gluon.jit
def _load_block(x_desc, w_desc, x_bufs, w_bufs, ready, off_m, off_n, j, pred,
                STAGES: gl.constexpr):  # fmt: skip
    """Start the copy of K block j of x and of the weight tile into slot j % STAGES (if pred)."""
    s = j % STAGES
    bar = ready.index(s)
    mbarrier.expect(bar, x_desc.block_type.nbytes + w_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(x_desc, [off_m, j * 64], bar, x_bufs.index(s), pred=pred)
    tma.async_copy_global_to_shared(w_desc, [off_n, j * 64], bar, w_bufs.index(s), pred=pred)


@gluon.jit
def _group_scales(scales_ptr, rows, block, g, groups_per_row, GROUP_SIZE: gl.constexpr):
    """int32 scales [rows] of the g-th 32-value part of K block ``block`` (clamped in the row)."""
    column = gl.minimum((block * 64 + g * 32) // GROUP_SIZE, groups_per_row - 1)
    return gl.load(scales_ptr + rows * groups_per_row + column).to(gl.int32)


@gluon.jit
def _weights(w_slot, row0, e0, e1, USUAL: gl.constexpr):
    """bf16 [64, 4, 16] weights of slot rows row0.., each thread 16 values of one row and one
    16-value chunk (16-byte reads, one scale a thread and row); e0 and e1 are the scales [64]
    of the block's first and second 32 values of K."""
    v = w_slot.reshape([2 * _ROWS, 4, 16]).slice(row0, _ROWS, dim=0).load(_W_LAYOUT)
    chunk = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(2, _W_LAYOUT)))
    second = gl.expand_dims(chunk, 0) >= 2  # chunks 2 and 3: the block's second 32 values
    e = gl.where(second, gl.expand_dims(e1, 1), gl.expand_dims(e0, 1))
    e = gl.expand_dims(e, 2)
    if USUAL:
        step = ((e - 6) << 7).to(gl.int16).to(gl.bfloat16, bitcast=True)  # 2^(e - 133)
        step = gl.broadcast(step, v)[0]
        w = gl.inline_asm_elementwise(
            _FOUR_VALUES_ASM, "=r,=r,r,r,r", [v, step], dtype=gl.bfloat16, is_pure=True, pack=4
        )
    else:  # a scale outside 7..252 among the program's rows: the spec's six steps
        bits = dequantize_bits(v.to(gl.int32), gl.broadcast(e, v)[0])
        w = bits.to(gl.int16).to(gl.bfloat16, bitcast=True)
    return gl.reshape(w, [_ROWS, 64])


@gluon.jit
def _block(scales_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_bufs, ready, empty, off_m, off_n, i,
           k_blocks, acc, e0, e1, row0: gl.constexpr, STAGES: gl.constexpr,
           USUAL: gl.constexpr):  # fmt: skip
    """K block i: wait for its slot, dequantize this group's weights into one of its two bf16
    tiles in shared memory, start the block's four wgmmas (one group, both operands from shared
    memory) and wait for the previous block's, whose slot then goes back. The warp group of
    row0 = 0 also refills the slot of block i - 2 once the other group is done with it."""
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    if row0 == 0:  # no branch around the wait: ptxas would serialize the wgmmas
        j = i + STAGES - 2
        refill = (i > 1) & (j < k_blocks)
        mbarrier.wait(empty.index(j % STAGES), ((j // STAGES) & 1) ^ 1, pred=refill)
        _load_block(x_desc, w_desc, x_bufs, w_bufs, ready, off_m, off_n, j, refill, STAGES)
    tile = wb_bufs.index(i % 2)  # the block before last read the other; its wgmmas are done
    tile.store(_weights(w_bufs.index(s), row0, e0, e1, USUAL))
    fence_async_shared()  # the tensor cores read it next
    gl.thread_barrier()  # every thread of the group has written its part
    acc = warpgroup_mma(tile, x_bufs.index(s).permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
    mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1, pred=i > 0)
    return acc


@gluon.jit
def _multiply(scales_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_bufs, ready, empty, off_m, off_n,
              k_blocks, N, K, row0: gl.constexpr, BLOCK_M: gl.constexpr,
              GROUP_SIZE: gl.constexpr, STAGES: gl.constexpr, USUAL: gl.constexpr):  # fmt: skip
    """float32 [64, BLOCK_M]: weight rows off_n + row0.. times x's tile, over all of K.

    Two blocks an iteration, so that a block's weights (dequantized while the previous block's
    wgmmas run) never share registers with the block in flight: otherwise ptxas serializes."""
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    rows = off_n + row0 + gl.arange(0, _ROWS, layout=_ROWS_LAYOUT)
    rows = gl.minimum(rows, N - 1).to(gl.int64)
    groups_per_row = K // GROUP_SIZE
    # An even number of blocks, at least two: without a path that skips the loop, no zeroing of
    # the accumulator lies between a wgmma and its wait (ptxas would serialize them).
    gl.assume(k_blocks > 1)
    acc = gl.zeros([_ROWS, BLOCK_M], gl.float32, acc_layout)
    operands = (x_desc, w_desc, x_bufs, w_bufs, wb_bufs, ready, empty, off_m, off_n)
    # Scales come from global memory (a few bytes a row and block), two blocks ahead.
    e0_even = _group_scales(scales_ptr, rows, 0, 0, groups_per_row, GROUP_SIZE)
    e1_even = _group_scales(scales_ptr, rows, 0, 1, groups_per_row, GROUP_SIZE)
    e0_odd = _group_scales(scales_ptr, rows, 1, 0, groups_per_row, GROUP_SIZE)
    e1_odd = _group_scales(scales_ptr, rows, 1, 1, groups_per_row, GROUP_SIZE)
    for i in range(0, k_blocks, 2):
        e0 = e0_even
        e1 = e1_even
        later = gl.minimum(i + 2, k_blocks - 2)
        e0_even = _group_scales(scales_ptr, rows, later, 0, groups_per_row, GROUP_SIZE)
        e1_even = _group_scales(scales_ptr, rows, later, 1, groups_per_row, GROUP_SIZE)
        acc = _block(scales_ptr, *operands, i, k_blocks, acc, e0, e1, row0, STAGES, USUAL)
        e0 = e0_odd
        e1 = e1_odd
        e0_odd = _group_scales(scales_ptr, rows, later + 1, 0, groups_per_row, GROUP_SIZE)
        e1_odd = _group_scales(scales_ptr, rows, later + 1, 1, groups_per_row, GROUP_SIZE)
        acc = _block(scales_ptr, *operands, i + 1, k_blocks, acc, e0, e1, row0, STAGES, USUAL)
    return warpgroup_mma_wait(num_outstanding=0, deps=(acc,))


@gluon.jit
def _consumer(scales_ptr, bias_ptr, out_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_bufs, ready, empty,
              off_m, off_n, k_blocks, M, N, K, stride_om, usual, row0: gl.constexpr,
              BLOCK_M: gl.constexpr, GROUP_SIZE: gl.constexpr, STAGES: gl.constexpr,
              HAS_BIAS: gl.constexpr):  # fmt: skip
    operands = (scales_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_bufs, ready, empty, off_m, off_n)
    operands += (k_blocks,)
    operands += (N, K)
    if usual:
        acc = _multiply(*operands, row0, BLOCK_M, GROUP_SIZE, STAGES, True)
    else:  # a scale outside 7..252 among the program's rows: the spec's six steps
        acc = _multiply(*operands, row0, BLOCK_M, GROUP_SIZE, STAGES, False)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16]
    )
    offs_n = off_n + row0 + gl.arange(0, _ROWS, layout=gl.SliceLayout(1, acc_layout))
    offs_m = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    n_mask = offs_n < N
    if HAS_BIAS:
        bias = gl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 1)
    ptrs = out_ptr + offs_m.to(gl.int64)[None, :] * stride_om + offs_n[:, None]
    mask = n_mask[:, None] & (offs_m[None, :] < M)
    gl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _scales_usual(scales_ptr, off_n, N, K, GROUP_SIZE: gl.constexpr):
    """Whether every scale of the program's 128 weight rows lies in 7..252."""
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [32, 1], [gl.num_warps(), 1], [1, 0])
    groups_per_row = K // GROUP_SIZE
    rows = gl.minimum(off_n + gl.arange(0, 128, layout=gl.SliceLayout(1, layout)), N - 1)
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, layout))
    lowest = gl.full([128, 16], 255, gl.int32, layout)
    highest = gl.zeros([128, 16], gl.int32, layout)
    for c in range(0, groups_per_row, 16):
        ptrs = scales_ptr + rows.to(gl.int64)[:, None] * groups_per_row + (c + cols)[None, :]
        mask = gl.broadcast((c + cols)[None, :] < groups_per_row, ptrs)[0]
        e = gl.load(ptrs, mask=mask, other=128).to(gl.int32)
        lowest = gl.minimum(lowest, e)
        highest = gl.maximum(highest, e)
    return (gl.min(gl.min(lowest, 1), 0) >= _USUAL_SCALE_MIN) & (
        gl.max(gl.max(highest, 1), 0) <= _USUAL_SCALE_MAX
    )


@gluon.jit
def mxint8_mma_ws_kernel(
    x_desc,
    w_desc,
    scales_ptr,
    bias_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_om,
    GROUP_SIZE: gl.constexpr,
    HAS_BIAS: gl.constexpr,
    STAGES: gl.constexpr,
    CONSUMER_REGISTERS: gl.constexpr,
):
    """One tile: x_desc's blocks [BLOCK_M, 64] of x, w_desc's [128, 64] of the mantissas. The
    grid runs a weight tile's batch tiles next to each other so that they share its reads."""
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]
    tile = gl.program_id(0)
    m_tiles = gl.cdiv(M, BLOCK_M)
    off_m = (tile % m_tiles) * BLOCK_M
    off_n = (tile // m_tiles) * 128
    k_blocks = K // 64
    usual = _scales_usual(scales_ptr, off_n, N, K, GROUP_SIZE)

    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BLOCK_M, 64], x_desc.layout)
    w_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES, 128, 64], w_desc.layout)
    # each group's two bf16 tiles: wgmma reads one while the group writes the other
    wb_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    wb_first = gl.allocate_shared_memory(gl.bfloat16, [2, 64, 64], wb_layout)
    wb_second = gl.allocate_shared_memory(gl.bfloat16, [2, 64, 64], wb_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival from each consumer warp group
    for j in gl.static_range(STAGES):  # the first blocks' slots are free
        _load_block(x_desc, w_desc, x_bufs, w_bufs, ready, off_m, off_n, j, j < k_blocks, STAGES)

    gl.warp_specialize(
        [
            (_consumer, (scales_ptr, bias_ptr, out_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_first,
                         ready, empty, off_m, off_n, k_blocks, M, N, K, stride_om, usual,
                         _FIRST_ROW, BLOCK_M, GROUP_SIZE, STAGES, HAS_BIAS)),
            (_consumer, (scales_ptr, bias_ptr, out_ptr, x_desc, w_desc, x_bufs, w_bufs, wb_second,
                         ready, empty, off_m, off_n, k_blocks, M, N, K, stride_om, usual, _ROWS,
                         BLOCK_M, GROUP_SIZE, STAGES, HAS_BIAS)),
        ],
        [4],
        [CONSUMER_REGISTERS],
    )  # fmt: skip


# --- Host side ----------------------------------------------------------------------------------
def mma_ws_fits(x2d: torch.Tensor, mantissa: torch.Tensor, group_size: int) -> bool:
    """Whether this kernel takes the problem: a Hopper GPU, bf16 x whose rows the copy engine
    can read, K a multiple of 128, groups of 32 values or a multiple of 64."""
    k = x2d.shape[1]
    return (
        x2d.is_cuda
        and torch.cuda.get_device_capability(x2d.device)[0] == 9
        and x2d.dtype == torch.bfloat16
        and (group_size == 32 or group_size % 64 == 0)
        and k > 0
        and k % 128 == 0
        and x2d.data_ptr() % 16 == 0
        and (x2d.stride(0) * 2) % 16 == 0
        and x2d.stride(1) == 1
        and mantissa.data_ptr() % 16 == 0
    )


@functools.lru_cache(maxsize=64)
def shared_layouts(block_m: int):
    x_layout = gl.NVMMASharedLayout.get_default_for([block_m, BLOCK_K], gl.bfloat16)
    # unswizzled: each thread reads 16 bytes of a 64-byte row, a warp 512 contiguous bytes
    w_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    return x_layout, w_layout


def launch_mma_ws(x2d, mantissa, scales, bias, out, group_size: int, config):
    """Run the kernel with ``config`` (kernel "mma_ws": block_m batch rows a tile, block_n 128,
    block_k 64, num_stages slots) on bf16 ``x2d`` [M, K] into ``out`` [M, N]."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    x_layout, w_layout = shared_layouts(config.block_m)
    x_desc = TensorDescriptor(x2d, [m, k], list(x2d.stride()), [config.block_m, BLOCK_K], x_layout)
    w_desc = TensorDescriptor(mantissa, [n, k], [k, 1], [BLOCK_N, BLOCK_K], w_layout)
    tiles = -(-m // config.block_m) * -(-n // BLOCK_N)
    bias_or_out = bias if bias is not None else out
    return mxint8_mma_ws_kernel[(tiles,)](
        x_desc, w_desc, scales, bias_or_out, out, m, n, k, out.stride(0),
        GROUP_SIZE=group_size, HAS_BIAS=bias is not None, STAGES=config.num_stages,
        CONSUMER_REGISTERS=CONSUMER_REGISTERS,
        num_warps=4,
    )  # fmt: skip
