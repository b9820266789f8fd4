"""The fused linear as a warp-specialized mixed-input GEMM (Hopper, Gluon).

Three groups of warps share each program and hand tiles to each other through shared memory,
signalled by mbarriers, so that reading the weight, dequantizing it and the tensor cores overlap:

- the loader (1 warp) brings each K block of x (bf16) and of the int8 mantissas into a ring of
  ``STAGES`` shared-memory slots with the bulk tensor copy engine (TMA);
- the dequantizer (4 warps) reads a slot's mantissas as 16-byte vectors, turns them into bf16
  with one inline-assembly instance per four values (linear_mma's, bit for bit the spec's
  values for scales 7..252; the spec's six steps for a block with any other scale) and writes
  the bf16 tile into a second ring that wgmma reads;
- the default warps (one or two warpgroups) run wgmma on both shared-memory operands,
  asynchronously, one block in flight while the next is waited for, then store the tile.

Two orientations, as linear_mma's: "ws" computes ``out^T = W @ x^T`` (the weight tile is
wgmma's left operand, so 64-row weight tiles meet batches as narrow as 8: batch 1 to 64, with
K split across programs), "ws_plain" computes ``out = x @ W^T`` (batches of 64 and more, whose
stores are row-contiguous). Needs CUDA with wgmma (compute capability 9.x), bf16 x, groups of
16 values or more; ``launch_ws`` is the host side.
"""

from __future__ import annotations

import functools

import torch
import triton
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
from kernels.mxint8.linear_mma import FOUR_VALUES_ASM
from kernels.mxint8.linear_tile import USUAL_SCALE_MAX, USUAL_SCALE_MIN

_USUAL_SCALE_MIN = gl.constexpr(USUAL_SCALE_MIN)
_DEQUANTIZERS = gl.constexpr(2)
_PART_K = gl.constexpr(64)
_USUAL_SCALE_MAX = gl.constexpr(USUAL_SCALE_MAX)
_FOUR_VALUES_ASM = gl.constexpr(FOUR_VALUES_ASM)
# Two dequantizing warpgroups take alternate K blocks: one block's chain of waits, shared-memory
# reads, conversion and stores is latency-bound in one warp a scheduler (~0.5 us for 128 x 64
# values, measured with %globaltimer stamps on an H200), so two chains run side by side.
DEQUANTIZERS = 2
DEQUANTIZE_WARPS = 4  # each
DEQUANTIZE_REGISTERS = 128  # setmaxnreg's budget for each dequantizing warp
W_STAGES = 4  # bf16 weight tiles between the dequantizers and the tensor cores
PART_K = 64  # the K width the dequantizers and the tensor cores work in


@gluon.constexpr_function
def _instr_n(rows, cols, warps):
    """The widest wgmma N (a multiple of 8, <= 256) that divides ``cols`` and fits the warps."""
    row_reps = triton.cdiv(rows, 16)
    col_reps = triton.cdiv(warps, row_reps)
    widest = max(cols // col_reps, 8)
    n = 256
    while n > widest or cols % n != 0:
        n -= 8
    return n


@gluon.constexpr_function
def _mma_warps(rows, warps):
    """wgmma's warps_per_cta for an accumulator of ``rows`` rows: along rows first."""
    along_rows = min(warps, max(4, rows // 16))
    return [along_rows, warps // along_rows]


@gluon.constexpr_function
def _smaller(a, b):
    return min(a, b)


@gluon.constexpr_function
def _dequantize_layout(block_n, groups, inner, warps):
    """[BLOCK_N, groups, inner] int8: 16 bytes of one row and group per thread."""
    chunks = inner // 16
    threads = [32 // (groups * chunks), groups, chunks]
    return gl.BlockedLayout([1, 1, 16], threads, [warps, 1, 1], [2, 1, 0])


@gluon.jit
def _loader(x_desc, w_desc, scales_ptr, bufs, bars, coords, sizes,
            BLOCK_K: gl.constexpr, GROUP_SIZE: gl.constexpr, STAGES: gl.constexpr,
            W_STAGES: gl.constexpr, PART: gl.constexpr):  # fmt: skip
    x_bufs, w8_bufs, wb_bufs, strips = bufs
    load_ready, load_empty, wb_ready, wb_empty = bars
    off_m, off_n, k_start, k_blocks = coords
    for i in range(k_blocks):
        s = i % STAGES
        mbarrier.wait(load_empty.index(s), ((i // STAGES) & 1) ^ 1)
        ready = load_ready.index(s)
        mbarrier.expect(ready, x_desc.block_type.nbytes + w_desc.block_type.nbytes)
        k = k_start + i * BLOCK_K
        tma.async_copy_global_to_shared(x_desc, [off_m, k], ready, x_bufs.index(s))
        tma.async_copy_global_to_shared(w_desc, [off_n, k], ready, w8_bufs.index(s))


@gluon.jit
def _scale_chunk(row_ptrs, blocks, groups, chunk, k_start, groups_per_row, CHUNK: gl.constexpr,
                 INNER: gl.constexpr, BLOCK_K: gl.constexpr,
                 GROUP_SIZE: gl.constexpr):  # fmt: skip
    """The scale bytes [CHUNK, BLOCK_N, groups] of K blocks chunk * CHUNK ... + CHUNK - 1,
    clamped inside the row."""
    block = chunk * CHUNK + blocks
    k = k_start + block[:, None, None] * BLOCK_K + groups[None, None, :] * INNER
    column = gl.minimum(k // GROUP_SIZE, groups_per_row - 1)
    return gl.load(row_ptrs[None, :, None] + column)


@gluon.jit
def _dequantizer(x_desc, w_desc, scales_ptr, bufs, bars, coords, sizes,
                 BLOCK_K: gl.constexpr, GROUP_SIZE: gl.constexpr, STAGES: gl.constexpr,
                 W_STAGES: gl.constexpr, PART: gl.constexpr):  # fmt: skip
    """Dequantizer PART of DEQUANTIZERS: K blocks PART, PART + DEQUANTIZERS, ..."""
    x_bufs, w8_bufs, wb_bufs, strips = bufs
    load_ready, load_empty, wb_ready, wb_empty = bars
    off_m, off_n, k_start, k_blocks = coords
    N, K = sizes
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    INNER: gl.constexpr = _smaller(GROUP_SIZE, BLOCK_K)  # values of one group in a block
    GROUPS: gl.constexpr = BLOCK_K // INNER
    CHUNK: gl.constexpr = strips.shape[0] // _DEQUANTIZERS  # K blocks a strip holds
    warps: gl.constexpr = gl.num_warps()
    PART_INNER: gl.constexpr = _smaller(INNER, _PART_K)
    layout: gl.constexpr = _dequantize_layout(BLOCK_N, _PART_K // PART_INNER, PART_INNER, warps)
    scale_layout: gl.constexpr = gl.SliceLayout(2, layout)
    chunk_layout: gl.constexpr = gl.BlockedLayout([CHUNK, 1, GROUPS], [1, 32, 1], [1, warps, 1],
                                                  [2, 0, 1])  # fmt: skip
    rows = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, gl.SliceLayout(2, chunk_layout)))
    row_ptrs = scales_ptr + gl.minimum(rows, N - 1).to(gl.int64) * (K // GROUP_SIZE)
    blocks = gl.arange(0, CHUNK, layout=gl.SliceLayout(1, gl.SliceLayout(2, chunk_layout)))
    groups = gl.arange(0, GROUPS, layout=gl.SliceLayout(0, gl.SliceLayout(1, chunk_layout)))
    chunk_args = (k_start, K // GROUP_SIZE, CHUNK, INNER, BLOCK_K, GROUP_SIZE)
    # Scales come from global memory (a block's are a few bytes a row, too narrow for the copy
    # engine), CHUNK blocks' at a time, one chunk ahead, through a strip of shared memory.
    pending = _scale_chunk(row_ptrs, blocks, groups, 0, *chunk_args)
    both = strips._reinterpret(gl.uint8, [strips.shape[0] * BLOCK_N, GROUPS], strips.layout)
    flat = both.slice(PART * CHUNK * BLOCK_N, CHUNK * BLOCK_N)  # this dequantizer's strip
    for chunk in range(k_blocks // CHUNK):
        # one test a chunk: are all its scales in 7..252, where the inline assembly is exact?
        usual = (gl.min(gl.min(gl.min(pending, 2), 1), 0) >= _USUAL_SCALE_MIN) & (
            gl.max(gl.max(gl.max(pending, 2), 1), 0) <= _USUAL_SCALE_MAX
        )
        flat.store(gl.reshape(pending, [CHUNK * BLOCK_N, GROUPS]))
        pending = _scale_chunk(row_ptrs, blocks, groups, chunk + 1, *chunk_args)
        for j in range(PART, CHUNK, _DEQUANTIZERS):
            _dequantize_block(strips.index(PART * CHUNK + j), usual, chunk * CHUNK + j, x_bufs,
                              w8_bufs, wb_bufs, load_ready, load_empty, wb_ready, wb_empty, layout,
                              BLOCK_N, GROUPS, INNER, BLOCK_K, STAGES, W_STAGES)  # fmt: skip


@gluon.jit
def _dequantize_block(scales, usual, i, x_bufs, w8_bufs, wb_bufs, load_ready, load_empty,
                      wb_ready, wb_empty, layout: gl.constexpr, BLOCK_N: gl.constexpr,
                      GROUPS: gl.constexpr, INNER: gl.constexpr, BLOCK_K: gl.constexpr,
                      STAGES: gl.constexpr, W_STAGES: gl.constexpr):  # fmt: skip
    """K block ``i`` (``scales``: its [BLOCK_N, GROUPS] bytes in shared memory), in parts of
    _PART_K: mantissas from the copy ring to bf16 in the tensor cores' ring."""
    PARTS: gl.constexpr = BLOCK_K // _PART_K
    PART_INNER: gl.constexpr = _smaller(INNER, _PART_K)
    PART_GROUPS: gl.constexpr = _PART_K // PART_INNER
    s = i % STAGES
    mbarrier.wait(load_ready.index(s), (i // STAGES) & 1)
    slot = w8_bufs.index(s).reshape([BLOCK_N, BLOCK_K // PART_INNER, PART_INNER])
    for part in gl.static_range(PARTS):
        v = slot.slice(part * PART_GROUPS, PART_GROUPS, dim=1).load(layout)
        if part == PARTS - 1:
            fence_async_shared()  # the reads are ordered before the copy engine refills the slot
            mbarrier.arrive(load_empty.index(s), count=1)
        # this part's groups in the block (static_range unrolls: part is a constant)
        e = scales.slice((part * _PART_K) // INNER, _smaller(PART_GROUPS, GROUPS), dim=1)
        e = e.load(gl.SliceLayout(2, layout)).to(gl.int32)
        if usual:
            step = ((e - 6) << 7).to(gl.int16).to(gl.bfloat16, bitcast=True)  # 2^(e - 133)
            step = gl.expand_dims(step, 2)  # broadcast along the group by the asm's operands
            w = gl.inline_asm_elementwise(
                _FOUR_VALUES_ASM, "=r,=r,r,r,r", [v, step], dtype=gl.bfloat16, is_pure=True,
                pack=4,
            )  # fmt: skip
        else:  # a scale outside 7..252 in this block: the spec's six steps
            bits = dequantize_bits(v.to(gl.int32), gl.expand_dims(e, 2))
            w = bits.to(gl.int16).to(gl.bfloat16, bitcast=True)
        tile = gl.reshape(w, [BLOCK_N, _PART_K])
        u = i * PARTS + part
        b = u % W_STAGES
        mbarrier.wait(wb_empty.index(b), ((u // W_STAGES) & 1) ^ 1)
        wb_bufs.index(b).store(tile)
        fence_async_shared()  # the tensor cores read it next
        mbarrier.arrive(wb_ready.index(b), count=1)


@gluon.jit
def _multiplier(bufs, bars, k_blocks, acc_layout: gl.constexpr, ACC_SHAPE: gl.constexpr,
                STAGES: gl.constexpr, W_STAGES: gl.constexpr,
                WEIGHT_LEFT: gl.constexpr):  # fmt: skip
    x_bufs, w8_bufs, wb_bufs, strips = bufs
    load_ready, load_empty, wb_ready, wb_empty = bars
    acc = gl.zeros(ACC_SHAPE, gl.float32, acc_layout)
    PARTS: gl.constexpr = x_bufs.shape[2] // _PART_K
    for i in range(k_blocks):
        s = i % STAGES
        mbarrier.wait(load_ready.index(s), (i // STAGES) & 1)
        for part in gl.static_range(PARTS):
            u = i * PARTS + part
            b = u % W_STAGES
            mbarrier.wait(wb_ready.index(b), (u // W_STAGES) & 1)
            x_part = x_bufs.index(s).slice(part * _PART_K, _PART_K, dim=1)
            if WEIGHT_LEFT:
                acc = warpgroup_mma(wb_bufs.index(b), x_part.permute((1, 0)), acc, is_async=True)
            else:
                acc = warpgroup_mma(x_part, wb_bufs.index(b).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            # the previous part's product is done: its slots go back to the dequantizers and,
            # at a block's first part, the previous block's copy slot to the loader
            mbarrier.arrive(wb_empty.index((u + W_STAGES - 1) % W_STAGES), count=1, pred=u > 0)
            if part == 0:
                mbarrier.arrive(load_empty.index((i + STAGES - 1) % STAGES), count=1, pred=i > 0)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    return (acc,)  # a tuple, as warp_specialize wants


@gluon.jit
def _store(out_ptr, bias_ptr, total, offs_m, offs_n, M, N, stride_om, HAS_BIAS: gl.constexpr,
           WEIGHT_LEFT: gl.constexpr):  # fmt: skip
    """out[offs_m, offs_n] = total (+ bias) in out's dtype; ``total`` is [n, m] if WEIGHT_LEFT."""
    n_mask = offs_n < N
    if WEIGHT_LEFT:
        if HAS_BIAS:
            bias = gl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(gl.float32)
            total = total + gl.expand_dims(bias, 1)
        ptrs = out_ptr + offs_m.to(gl.int64)[None, :] * stride_om + offs_n[:, None]
        mask = n_mask[:, None] & (offs_m[None, :] < M)
    else:
        if HAS_BIAS:
            bias = gl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(gl.float32)
            total = total + gl.expand_dims(bias, 0)
        ptrs = out_ptr + offs_m.to(gl.int64)[:, None] * stride_om + offs_n[None, :]
        mask = (offs_m[:, None] < M) & n_mask[None, :]
    gl.store(ptrs, total.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def mxint8_ws_kernel(
    x_desc,
    w_desc,
    scales_ptr,
    bias_ptr,
    out_ptr,
    workspace_ptr,
    counters_ptr,
    M,
    N,
    K,
    stride_om,
    k_blocks,
    GROUP_SIZE: gl.constexpr,
    HAS_BIAS: gl.constexpr,
    SPLIT_K: gl.constexpr,
    STAGES: gl.constexpr,
    W_STAGES: gl.constexpr,
    WEIGHT_LEFT: gl.constexpr,
    DEQUANTIZE_REGISTERS: gl.constexpr,
    SCALE_CHUNK: gl.constexpr,
):
    """One output tile (or its 1/SPLIT_K share of K): x_desc's block [BLOCK_M, BLOCK_K] of x,
    w_desc's [BLOCK_N, BLOCK_K] of the mantissas; the grid is (tiles, SPLIT_K), batch tiles of
    one weight tile next to each other so that they share its reads in L2."""
    BLOCK_M: gl.constexpr = x_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    tile = gl.program_id(0)
    pid_k = gl.program_id(1)
    m_tiles = gl.cdiv(M, BLOCK_M)
    off_m = (tile % m_tiles) * BLOCK_M
    off_n = (tile // m_tiles) * BLOCK_N
    k_start = pid_k * k_blocks * BLOCK_K

    x_shape: gl.constexpr = [STAGES, BLOCK_M, BLOCK_K]
    w8_shape: gl.constexpr = [STAGES, BLOCK_N, BLOCK_K]
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, x_shape, x_desc.layout)
    w8_bufs = gl.allocate_shared_memory(w_desc.dtype, w8_shape, w_desc.layout)
    wb_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, _PART_K], gl.bfloat16)
    wb_bufs = gl.allocate_shared_memory(gl.bfloat16, [W_STAGES, BLOCK_N, _PART_K], wb_layout)
    GROUPS: gl.constexpr = BLOCK_K // _smaller(GROUP_SIZE, BLOCK_K)
    strip_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])  # one chunk's
    strips = gl.allocate_shared_memory(
        gl.uint8, [_DEQUANTIZERS * SCALE_CHUNK, BLOCK_N, GROUPS], strip_layout
    )  # a strip of SCALE_CHUNK blocks' scales for each dequantizer
    load_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    load_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    wb_ready = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
    wb_empty = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_ready.index(i), count=1)
        mbarrier.init(load_empty.index(i), count=2)  # the multiplier's and the dequantizer's
    for i in gl.static_range(W_STAGES):
        mbarrier.init(wb_ready.index(i), count=1)
        mbarrier.init(wb_empty.index(i), count=1)

    if WEIGHT_LEFT:
        ACC_SHAPE: gl.constexpr = [BLOCK_N, BLOCK_M]
    else:
        ACC_SHAPE: gl.constexpr = [BLOCK_M, BLOCK_N]
    warps: gl.constexpr = gl.num_warps()
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0],
        warps_per_cta=_mma_warps(ACC_SHAPE[0], warps),
        instr_shape=[16, _instr_n(ACC_SHAPE[0], ACC_SHAPE[1], warps), 16],
    )
    bufs = (x_bufs, w8_bufs, wb_bufs, strips)
    bars = (load_ready, load_empty, wb_ready, wb_empty)
    coords = (off_m, off_n, k_start, k_blocks)
    sizes = (N, K)
    (acc,) = gl.warp_specialize(
        [
            (_multiplier, (bufs, bars, k_blocks, acc_layout, ACC_SHAPE, STAGES, W_STAGES,
                           WEIGHT_LEFT)),
            # (a tuple named first would turn its constexprs into tensors)
            (_dequantizer, (x_desc, w_desc, scales_ptr, bufs, bars, coords, sizes, BLOCK_K,
                            GROUP_SIZE, STAGES, W_STAGES, 0)),
            (_dequantizer, (x_desc, w_desc, scales_ptr, bufs, bars, coords, sizes, BLOCK_K,
                            GROUP_SIZE, STAGES, W_STAGES, 1)),
            (_loader, (x_desc, w_desc, scales_ptr, bufs, bars, coords, sizes, BLOCK_K,
                       GROUP_SIZE, STAGES, W_STAGES, 0)),
        ],
        [4, 4, 1],
        [DEQUANTIZE_REGISTERS, DEQUANTIZE_REGISTERS, 24],
    )  # fmt: skip

    if WEIGHT_LEFT:
        offs_n = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
        offs_m = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    else:
        offs_m = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
        offs_n = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, acc_layout))
    if SPLIT_K == 1:
        _store(out_ptr, bias_ptr, acc, offs_m, offs_n, M, N, stride_om, HAS_BIAS, WEIGHT_LEFT)
    else:
        # Each split stores its partial tile; the tile's last split to arrive sums them in
        # split order (deterministic) and stores, as linear_kernel.finish_split does.
        tiles = gl.num_programs(0)
        rows = gl.arange(0, ACC_SHAPE[0], layout=gl.SliceLayout(1, acc_layout))
        cols = gl.arange(0, ACC_SHAPE[1], layout=gl.SliceLayout(0, acc_layout))
        local = rows[:, None] * ACC_SHAPE[1] + cols[None, :]
        tile_size: gl.constexpr = ACC_SHAPE[0] * ACC_SHAPE[1]
        gl.store(workspace_ptr + (pid_k * tiles + tile).to(gl.int64) * tile_size + local, acc)
        gl.thread_barrier()  # every thread's part is written before the release below
        arrived = gl.atomic_add(counters_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            total = gl.zeros(ACC_SHAPE, gl.float32, acc_layout)
            for split in gl.static_range(SPLIT_K):
                slot = workspace_ptr + (split * tiles + tile).to(gl.int64) * tile_size
                total += gl.load(slot + local, cache_modifier=".cg")  # from L2: L1 may be stale
            _store(out_ptr, bias_ptr, total, offs_m, offs_n, M, N, stride_om, HAS_BIAS,
                   WEIGHT_LEFT)  # fmt: skip
            gl.atomic_xchg(counters_ptr + tile, 0, sem="relaxed", scope="gpu")  # next launch's


# --- Host side ----------------------------------------------------------------------------------
def ws_fits(x2d: torch.Tensor, mantissa: torch.Tensor, group_size: int) -> bool:
    """Whether the warp-specialized kernel takes this problem: a Hopper GPU, bf16 x whose rows
    the copy engine can read (16-byte aligned, K a multiple of 16), groups of >= 16 values."""
    k = x2d.shape[1]
    return (
        x2d.is_cuda
        and torch.cuda.get_device_capability(x2d.device)[0] == 9
        and x2d.dtype == torch.bfloat16
        and group_size >= 16
        and k % 16 == 0
        and x2d.data_ptr() % 16 == 0
        and (x2d.stride(0) * 2) % 16 == 0
        and mantissa.data_ptr() % 16 == 0
    )


@functools.lru_cache(maxsize=256)
def _shared_layouts(block_m: int, block_n: int, block_k: int):
    x_layout = gl.NVMMASharedLayout.get_default_for([block_m, block_k], gl.bfloat16)
    w_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
    return x_layout, w_layout


def max_registers(num_warps: int) -> int:
    """The per-thread register cap at launch: one program an SM, every warpgroup counted."""
    warps = 4 * triton.cdiv(num_warps + DEQUANTIZERS * DEQUANTIZE_WARPS + 1, 4)
    return min(255, 65536 // (32 * warps)) // 8 * 8


def scale_chunk(k_blocks: int, block_k: int, group_size: int) -> int:
    """K blocks whose scales the dequantizer fetches at once: a divisor of k_blocks (<= 16),
    at most 32 bytes a row."""
    groups = max(block_k // group_size, 1)
    chunk = 16
    while k_blocks % chunk or chunk * groups > 32:
        chunk //= 2
    return chunk


def launch_ws(x2d, mantissa, scales, bias, out, workspace, counters, group_size: int, config):
    """Run the kernel with ``config`` ("ws" or "ws_plain"): block_m rows of x (the batch),
    block_n weight rows, block_k, K split, num_warps multiplying warps, num_stages slots."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    x_layout, w_layout = _shared_layouts(config.block_m, config.block_n, config.block_k)
    x_desc = TensorDescriptor(x2d, list(x2d.shape), list(x2d.stride()),
                              [config.block_m, config.block_k], x_layout)  # fmt: skip
    w_desc = TensorDescriptor(mantissa, [n, k], [k, 1], [config.block_n, config.block_k], w_layout)
    k_blocks = triton.cdiv(triton.cdiv(k, config.split_k), config.block_k)
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    bias_or_out = bias if bias is not None else out
    return mxint8_ws_kernel[(tiles, config.split_k)](
        x_desc, w_desc, scales, bias_or_out, out, workspace, counters, m, n, k, out.stride(0),
        k_blocks, GROUP_SIZE=group_size, HAS_BIAS=bias is not None, SPLIT_K=config.split_k,
        STAGES=config.num_stages, W_STAGES=W_STAGES, WEIGHT_LEFT=config.kernel == "ws",
        DEQUANTIZE_REGISTERS=DEQUANTIZE_REGISTERS,
        SCALE_CHUNK=scale_chunk(k_blocks, config.block_k, group_size),
        num_warps=config.num_warps, maxnreg=max_registers(config.num_warps),
    )  # fmt: skip
