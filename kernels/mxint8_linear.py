"""Fused MXINT8 linear: ``y = x @ W^T + b`` with ``W`` read as MXINT8 and dequantized in registers.

The lab's layer dequantizes the whole weight to bf16 and then calls ``F.linear``. This kernel reads
the int8 mantissas and their scales tile by tile, rebuilds each tile's bf16 values in registers
(bit for bit the spec's six steps) and feeds them to ``tl.dot`` with a float32 accumulator, so the
weight crosses memory once, at 8 + 8/G bits per value. ``../shared/MXINT8.md`` is the format;
the "Fused MXINT8 linear" section of ``docs/NOTES.md`` explains the design.

Layers, top to bottom: constants, dequantizing one tile, the kernel and its helpers, launch
configurations and the autotuner, input checks, the PyTorch reference, and the launcher.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

from kernels.mxint8 import (
    DEFAULT_GROUP_SIZE,
    _check_group_size,
    _dequantize_bits,
    _describe,
    dequantize,
    dequantize_reference,
    triton_available_for,
)

# --- Constants --------------------------------------------------------------------------------
# Scales whose values `_dequantize_usual` rebuilds bit for bit in a few instructions. A program
# that meets any other scale redoes its share with the spec's six steps (`_dequantize_bits`).
USUAL_SCALE_MIN = 7  # below, v/64 * 2^(e-127) can be a bf16 subnormal
USUAL_SCALE_MAX = 252  # above, the float32 "magic" exponent e + 2 would pass 254
_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)
_NEUTRAL_SCALE = tl.constexpr(127)  # read for groups past K: a usual scale, keeps tails fast
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
BIAS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --- Dequantizing one weight tile -------------------------------------------------------------
@triton.jit
def _dequantize_usual(v, e):
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
def _expand_groups(e, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Per-group scales [BLOCK_N, groups] -> one per value [BLOCK_N, BLOCK_K] (or [BLOCK_N, 1])."""
    if GROUP_SIZE >= BLOCK_K:
        full = e  # one group spans the tile: [BLOCK_N, 1] broadcasts along K
    else:
        groups: tl.constexpr = BLOCK_K // GROUP_SIZE
        full = tl.broadcast_to(e[:, :, None], (BLOCK_N, groups, GROUP_SIZE))
        full = tl.reshape(full, (BLOCK_N, BLOCK_K))
    return full


@triton.jit
def _dequantize_tile(
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
    e = _expand_groups(e, BLOCK_N, BLOCK_K, GROUP_SIZE)
    if SIX_STEPS:
        w = _dequantize_bits(v, e).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        w = _dequantize_usual(v, e)
    return w


@triton.jit
def _load_scales(
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
def _widen_bf16(t):
    """float32 of bf16 ``t`` by a 16-bit shift, for the interpreter's dot.

    Triton 3.6's interpreter holds bf16 as raw uint16 and its dot multiplies those integers; its
    own bf16 -> float32 cast also gets subnormals wrong. The shift is exact everywhere.
    """
    return (t.to(tl.uint16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


# --- The kernel -------------------------------------------------------------------------------
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
    e_next = _load_scales(scales_ptr, rows, k_start, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
    for i in range(k_blocks):
        k0 = k_start + i * BLOCK_K
        e = e_next
        k_next = k0 + BLOCK_K
        if EVEN_K:
            k_next = tl.minimum(k_next, K - BLOCK_K)  # stays inside the tensor, no mask needed
        e_next = _load_scales(scales_ptr, rows, k_next, groups_per_row, BLOCK_K, GROUP_SIZE, EVEN_K)
        if EVEN_K:
            v = tl.load(w_ptrs)
            x_t = tl.load(x_ptrs)
        else:
            k_mask = k0 + tl.arange(0, BLOCK_K) < K
            v = tl.load(w_ptrs, mask=k_mask[None, :], other=0)
            x_t = tl.load(x_ptrs, mask=k_mask[:, None], other=0.0)
        lowest = tl.minimum(lowest, e)
        highest = tl.maximum(highest, e)
        w = _dequantize_tile(v.to(tl.int32), e, BLOCK_N, BLOCK_K, GROUP_SIZE, SIX_STEPS)
        x_t = x_t.to(tl.bfloat16)  # float16 activations meet bf16 weights on bf16 tensor cores
        if INTERPRETED:
            acc = tl.dot(_widen_bf16(w), _widen_bf16(x_t), acc)
        else:
            acc = tl.dot(w, x_t, acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return acc, usual


@triton.jit
def _store_output(out_ptr, bias_ptr, acc, offs_m, offs_n, M, N, stride_om, HAS_BIAS: tl.constexpr):
    """out[offs_m, offs_n] = (acc^T + bias) in out's dtype; ``acc`` is [BLOCK_N, BLOCK_M]."""
    n_mask = offs_n < N
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[:, None]
    out_ptrs = out_ptr + offs_m.to(tl.int64)[None, :] * stride_om + offs_n[:, None]
    mask = n_mask[:, None] & (offs_m[None, :] < M)
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _finish_split(
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
        _store_output(out_ptr, bias_ptr, total, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
        tl.atomic_xchg(counters_ptr + tile, 0, sem="relaxed", scope="gpu")  # for the next launch


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def _mxint8_linear_kernel(
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
    acc, usual = _accumulate(
        *operands, stride_xm, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, False, INTERPRETED
    )
    if not usual:  # a scale outside 7..252 in this program's share: redo it with the six steps
        acc, usual = _accumulate(
            *operands, stride_xm, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, True, INTERPRETED
        )
    if SPLIT_K == 1:
        _store_output(out_ptr, bias_ptr, acc, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
    else:
        _finish_split(
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


# --- Launch configurations and the autotuner ---------------------------------------------------
@dataclass(frozen=True)
class LinearConfig:
    """Block sizes, K split, warps and pipeline depth of one launch of the fused kernel."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8

    def grid(self, m: int, n: int) -> tuple[int, int]:
        return triton.cdiv(m, self.block_m) * triton.cdiv(n, self.block_n), self.split_k

    def workspace_elements(self, m: int, n: int) -> int:
        """float32 elements of the partial tiles a split-K launch stores (0 without a split)."""
        if self.split_k == 1:
            return 0
        return self.grid(m, n)[0] * self.split_k * self.block_m * self.block_n


# Under TRITON_INTERPRET=1 (CPU CI) one config and no tuning. The interpreter's cost is per
# program and op, not per value, so big tiles: the quick tier's BERT-small forward takes 3.6 s
# with these, 37 s with 16 x 32 x 64 ones (9 s dequantizing first).
INTERPRETER_CONFIG = LinearConfig(64, 128, 128)
# (block_m, block_n, block_k, num_warps, num_stages) per batch bucket, before the K split.
# block_n is 64 per 4 warps: Hopper's wgmma then takes the weight from registers (measured in
# SASS: narrower tiles fall back to mma.sync and cost 2-5x more instructions per weight).
_TILES_GEMV = [(16, 64, 128, 4, 4), (16, 64, 256, 4, 3), (16, 128, 128, 8, 4), (16, 128, 256, 8, 3)]
_TILES_SMALL = [(64, 128, 128, 8, 4), (64, 64, 128, 4, 4), (64, 128, 256, 8, 3)]
_TILES_LARGE = [
    (128, 64, 64, 4, 4),
    (128, 128, 64, 8, 4),
    (256, 128, 64, 8, 2),  # 3 stages: NaN outputs at group 128 (Triton 3.6, H100)
    (128, 128, 128, 8, 3),
]
_PROGRAMS_PER_SM = 2  # enough tiles in flight to keep HBM busy while the weight streams


def _m_bucket(m: int) -> int:
    """Batch sizes that share a tuned config: 16, 32, 64, 128, 256, then multiples of 256."""
    return max(16, triton.next_power_of_2(m)) if m <= 256 else 256 * triton.cdiv(m, 256)


def _tile_shapes(m: int) -> list[tuple[int, int, int, int, int]]:
    bucket = _m_bucket(m)
    if bucket <= 16:  # GEMV-like: the weight read is the whole cost
        return _TILES_GEMV
    if bucket <= 64:
        return [(bucket, *shape[1:]) for shape in _TILES_SMALL]
    return _TILES_LARGE


def _split_k(bucket: int, n: int, k: int, block_m: int, block_n: int, block_k: int) -> int:
    """Smallest power-of-two split that gives every SM a couple of programs, while each split
    keeps >= 2 K blocks and the float32 partial tiles (written and read back) stay under half
    the weight's bytes: 16 * split * batch <= K."""
    tiles = triton.cdiv(bucket, block_m) * triton.cdiv(n, block_n)
    split = 1
    while (
        tiles * split < _PROGRAMS_PER_SM * _sm_count()
        and k >= 4 * split * block_k
        and 16 * 2 * split * bucket <= k
    ):
        split *= 2
    return split


@functools.cache
def _sm_count() -> int:
    if not torch.cuda.is_available():
        return 132  # an H100's, so configs can be planned without a GPU
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def candidate_configs(m: int, n: int, k: int) -> list[LinearConfig]:
    """The configs the autotuner times for an (m, n, k) problem: a few tile shapes for the batch
    bucket, each with the K split its shape calls for and with half that."""
    configs = []  # from the batch bucket alone, so one autotuner key has one candidate set
    for bm, bn, bk, warps, stages in _tile_shapes(m):
        split = _split_k(_m_bucket(m), n, k, bm, bn, bk)
        for s in sorted({split, max(split // 2, 1)}):
            configs.append(LinearConfig(bm, bn, bk, s, warps, stages))
    return configs


def _as_triton_config(config: LinearConfig) -> triton.Config:
    meta = dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=config.split_k,
        GROUP_M=config.group_m,
    )
    return triton.Config(meta, num_warps=config.num_warps, num_stages=config.num_stages)


def _from_triton_config(config: triton.Config) -> LinearConfig:
    meta = config.kwargs
    return LinearConfig(
        meta["BLOCK_M"],
        meta["BLOCK_N"],
        meta["BLOCK_K"],
        meta["SPLIT_K"],
        config.num_warps,
        config.num_stages,
        meta["GROUP_M"],
    )


def _all_triton_configs() -> list[triton.Config]:
    shapes = {(b, *s[1:]) for b in (16, 32, 64) for s in _TILES_SMALL} | set(_TILES_GEMV)
    shapes |= set(_TILES_LARGE)
    return [
        _as_triton_config(LinearConfig(bm, bn, bk, split, warps, stages))
        for bm, bn, bk, warps, stages in sorted(shapes)
        for split in (1, 2, 4, 8, 16, 32, 64)
    ]


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = candidate_configs(named_args["M"], named_args["N"], named_args["K"])
    return [c for c in configs if _from_triton_config(c) in wanted]


def _kernel_arguments(args: dict) -> dict:
    """Per-config arguments: the loop's trip count and whether K needs masks."""
    k, block_k, split_k = args["K"], args["BLOCK_K"], args["SPLIT_K"]
    k_blocks = triton.cdiv(triton.cdiv(k, split_k), block_k)
    return dict(
        k_blocks=k_blocks,
        EVEN_K=k % (block_k * split_k) == 0,  # every split covers whole blocks inside K
        K_BLOCKS_INTERPRETED=k_blocks if args["INTERPRETED"] else 0,  # 0: one binary on GPUs
    )


_mxint8_linear = triton.heuristics(
    {
        "k_blocks": lambda args: _kernel_arguments(args)["k_blocks"],
        "EVEN_K": lambda args: _kernel_arguments(args)["EVEN_K"],
        "K_BLOCKS_INTERPRETED": lambda args: _kernel_arguments(args)["K_BLOCKS_INTERPRETED"],
    }
)(_mxint8_linear_kernel)

_mxint8_linear_autotuned = triton.autotune(
    configs=_all_triton_configs(),
    key=["M_BUCKET", "N", "K", "GROUP_SIZE", "HAS_BIAS"],
    prune_configs_by={"early_config_prune": _prune},
    do_bench=lambda fn, quantiles: triton.testing.do_bench(
        fn, warmup=5, rep=20, quantiles=quantiles
    ),  # short runs: ~10 configs a shape, each timed in ~30 ms
)(_mxint8_linear)


def tuned_config(
    m: int, n: int, k: int, group_size: int, has_bias: bool | None = None
) -> LinearConfig | None:
    """The autotuner's choice for a problem it has tuned (with or without a bias when
    ``has_bias`` says which), else None."""
    for key, config in _mxint8_linear_autotuned.cache.items():
        same_bias = has_bias is None or key[4] == has_bias
        if tuple(key[:4]) == (_m_bucket(m), n, k, group_size) and same_bias:
            return _from_triton_config(config)
    return None


# --- Input checks (at the wrapper, never in the kernel) ---------------------------------------
def _check_linear_inputs(x, mantissa, scales, bias, group_size) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"x must be a bfloat16, float16 or float32 tensor, got {_describe(x)}")
    if not isinstance(mantissa, torch.Tensor) or mantissa.dtype != torch.int8:
        raise TypeError(f"mantissa must be an int8 tensor, got {_describe(mantissa)}")
    if not isinstance(scales, torch.Tensor) or scales.dtype != torch.uint8:
        raise TypeError(f"scales must be a uint8 tensor, got {_describe(scales)}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.dtype not in BIAS_DTYPES):
        raise TypeError(f"bias must be None or a floating-point tensor, got {_describe(bias)}")
    _check_group_size(group_size)
    if mantissa.dim() != 2:
        raise ValueError(f"mantissa must be 2-D [N, K], got shape {tuple(mantissa.shape)}")
    n, k = mantissa.shape
    if k % group_size != 0:
        raise ValueError(f"mantissa's K ({k}) must be a multiple of group_size={group_size}")
    if scales.shape != (n, k // group_size):
        raise ValueError(
            f"scales must have shape [N, K // group_size] = {[n, k // group_size]}, "
            f"got {list(scales.shape)}"
        )
    if x.dim() == 0 or x.shape[-1] != k:
        raise ValueError(f"x must have K = {k} in its last dimension, got shape {list(x.shape)}")
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"bias must have shape [N] = [{n}], got {list(bias.shape)}")
    _check_one_device(x=x, mantissa=mantissa, scales=scales, bias=bias)


def _check_one_device(**tensors: torch.Tensor | None) -> None:
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"x, mantissa, scales and bias must be on one device, got {where}")


def _check_kernel_group_size(group_size: int) -> None:
    if group_size & (group_size - 1) != 0:
        raise ValueError(
            f"group_size={group_size} is not a power of two, which the fused kernel needs; "
            "dequantize-then-linear (MXINT8Linear(fused=False)) takes any group size"
        )


def fused_linear_supported(x: torch.Tensor, group_size: int) -> bool:
    """True when ``mxint8_linear`` would run its Triton kernel for ``x`` and ``group_size``."""
    return (
        x.dtype in ACTIVATION_DTYPES
        and triton_available_for(x.device)
        and isinstance(group_size, int)
        and not isinstance(group_size, bool)
        and group_size > 0
        and group_size & (group_size - 1) == 0
    )


# --- Reference: plain PyTorch, float32 --------------------------------------------------------
def mxint8_linear_reference(
    x: torch.Tensor,
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
) -> torch.Tensor:
    """float32 ``F.linear(x, W, bias)`` with ``W = dequantize_reference(mantissa, scales)``.

    Every operand is upcast to float32 first; the result is float32 whatever x's dtype.
    """
    _check_linear_inputs(x, mantissa, scales, bias, group_size)
    weight = dequantize_reference(mantissa, scales, group_size).float()
    return F.linear(x.float(), weight, None if bias is None else bias.float())


# --- Launcher ---------------------------------------------------------------------------------
# From this batch size the launcher times the fused kernel against dequantize-once-then-cuBLAS
# on first use of a shape and keeps the faster: once the batch is large, the dequantization the
# fused kernel repeats for every row tile costs more than one pass over the weight.
DEQUANTIZE_ONCE_MIN_BATCH = 512
_decompositions: dict[tuple, str] = {}
_counters: dict[torch.device, torch.Tensor] = {}


def _split_k_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed int32 arrival counters, one per output tile, kept zeroed by the kernel itself.

    One buffer per device, shared by every launch on it: split-K launches of this kernel on two
    streams at once would race on it (run them on one stream).
    """
    counters = _counters.get(device)
    if counters is None or counters.numel() < tiles:
        counters = torch.zeros(max(tiles, 4096), dtype=torch.int32, device=device)
        _counters[device] = counters
    return counters


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _launch(x2d, mantissa, scales, bias, out, group_size, config: LinearConfig | None) -> None:
    """Run the kernel on 2-D ``x2d`` [M, K] into ``out`` [M, N]: ``config`` or the tuned one.

    The autotuner runs once per problem key; later calls launch its choice directly, since its
    per-call bookkeeping (pruning, heuristics over ~100 configs) cost ~100 us of host time on an
    H100 machine, several times the kernel's own 10-40 us.
    """
    m, k = x2d.shape
    n = mantissa.shape[0]
    if config is None:
        key = (_m_bucket(m), n, k, group_size, bias is not None, out.device)
        config = _tuned.get(key)
        if config is None:
            _autotune(x2d, mantissa, scales, bias, out, group_size)
            _tuned[key] = tuned_config(m, n, k, group_size, bias is not None)
            return
    grid, meta = _launch_plan(config, m, n, k, _interpreting())
    workspace = torch.empty(
        max(config.workspace_elements(m, n), 1), dtype=torch.float32, device=out.device
    )
    counters = _split_k_counters(out.device, grid[0])
    operands = (x2d, mantissa, scales, bias, out, workspace, counters)
    _mxint8_linear_kernel[grid](*_arguments(*operands), **_shared_meta(m, bias, group_size), **meta)


_tuned: dict[tuple, LinearConfig] = {}  # (batch bucket, N, K, group, has bias, device) -> config


@functools.lru_cache(maxsize=1024)
def _launch_plan(config: LinearConfig, m: int, n: int, k: int, interpreted: bool):
    """(grid, keyword arguments) of one launch: block sizes, loop trip count, K masking."""
    meta = dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=config.split_k,
        GROUP_M=config.group_m,
        INTERPRETED=interpreted,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    meta.update(_kernel_arguments(dict(meta, K=k)))
    return config.grid(m, n), meta


def _autotune(x2d, mantissa, scales, bias, out, group_size) -> None:
    """Time the candidate configs of this problem (the autotuner), leaving the result in out."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    configs = candidate_configs(m, n, k)
    workspace_elements = max(c.workspace_elements(m, n) for c in configs)
    workspace = torch.empty(max(workspace_elements, 1), dtype=torch.float32, device=out.device)
    counters = _split_k_counters(out.device, max(c.grid(m, n)[0] for c in configs))

    def grid(meta: dict) -> tuple[int, int]:
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        return tiles, meta["SPLIT_K"]

    operands = (x2d, mantissa, scales, bias, out, workspace, counters)
    meta = _shared_meta(m, bias, group_size)
    _mxint8_linear_autotuned[grid](*_arguments(*operands), **meta, INTERPRETED=_interpreting())


def _arguments(x2d, mantissa, scales, bias, out, workspace, counters) -> tuple:
    """The kernel's positional arguments; without a bias, ``out`` stands in (never read)."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    bias_or_out = bias if bias is not None else out
    strides = (x2d.stride(0), out.stride(0))
    return (x2d, mantissa, scales, bias_or_out, out, workspace, counters, m, n, k, *strides)


def _shared_meta(m: int, bias, group_size: int) -> dict:
    return dict(M_BUCKET=_m_bucket(m), GROUP_SIZE=group_size, HAS_BIAS=bias is not None)


def _dequantize_then_matmul(x2d, mantissa, scales, bias, group_size) -> torch.Tensor:
    """The lab's way, in bf16 like the kernel: one dequantization pass, then cuBLAS."""
    weight = dequantize(mantissa, scales, group_size)
    bias = None if bias is None else bias.to(torch.bfloat16)
    return F.linear(x2d.to(torch.bfloat16), weight, bias)


def _decomposition(x2d, mantissa, scales, bias, group_size) -> str:
    """How to run this shape, 'fused' or 'dequantize_once': timed on its first call."""
    m, k = x2d.shape
    if m < DEQUANTIZE_ONCE_MIN_BATCH or x2d.device.type != "cuda":
        return "fused"
    key = (_m_bucket(m), *mantissa.shape, group_size, bias is not None, x2d.device)
    if key not in _decompositions:
        out = torch.empty((m, mantissa.shape[0]), dtype=x2d.dtype, device=x2d.device)
        operands = (x2d, mantissa, scales, bias)
        fused = lambda: _launch(*operands, out, group_size, None)  # noqa: E731
        once = lambda: _dequantize_then_matmul(*operands, group_size)  # noqa: E731
        fused_ms = triton.testing.do_bench(fused, return_mode="median")
        once_ms = triton.testing.do_bench(once, return_mode="median")
        _decompositions[key] = "dequantize_once" if once_ms < fused_ms else "fused"
    return _decompositions[key]


def mxint8_linear(
    x: torch.Tensor,
    mantissa: torch.Tensor,
    scales: torch.Tensor,
    bias: torch.Tensor | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
    *,
    config: LinearConfig | None = None,
) -> torch.Tensor:
    """``x @ W^T + bias`` with ``W`` [N, K] stored as MXINT8, dequantized inside the matmul.

    ``mantissa`` is int8 [N, K]; ``scales`` uint8 [N, K // group_size], one biased exponent per
    ``group_size`` consecutive values along K; ``group_size`` must be a power of two (for other
    sizes, dequantize and call ``F.linear``). ``x`` is [..., K] in bfloat16, float16 or float32;
    ``bias`` None or [N] in a float dtype. Returns [..., N] in x's dtype.

    The weight is rebuilt exactly as ``dequantize`` does (bf16, bit for bit), multiplied on bf16
    tensor cores and accumulated in float32. So activations must be bf16 for the product to be
    exact: float16 activations are rounded to bfloat16 in the kernel, and float32 ones are cast
    to bfloat16 before it (the output is float32 again). Expect ~1e-3 relative error against a
    float32 ``F.linear`` on the dequantized weight, from those roundings and the output's.

    On CUDA the block sizes and K split are autotuned per (batch bucket, N, K, group size,
    bias), unless ``config`` fixes them; from DEQUANTIZE_ONCE_MIN_BATCH rows a shape may take
    dequantize-then-cuBLAS instead, when measured faster. Both choices time kernels on a
    shape's first call, so make that call outside CUDA graph capture. CPU tensors run the
    kernel through Triton's interpreter when ``TRITON_INTERPRET=1``, else
    ``mxint8_linear_reference``.
    """
    _check_linear_inputs(x, mantissa, scales, bias, group_size)
    _check_kernel_group_size(group_size)
    n, k = mantissa.shape
    if not triton_available_for(x.device) or x.numel() == 0 or n == 0:
        return mxint8_linear_reference(x, mantissa, scales, bias, group_size).to(x.dtype)
    x2d = x.reshape(-1, k)
    if x2d.dtype == torch.float32:
        x2d = x2d.to(torch.bfloat16)
    if x2d.stride(1) != 1:
        x2d = x2d.contiguous()
    if config is None and _interpreting():
        config = INTERPRETER_CONFIG  # the interpreter never autotunes
    operands = (x2d, mantissa.contiguous(), scales.contiguous(), bias)
    if config is None and _decomposition(*operands, group_size) == "dequantize_once":
        out = _dequantize_then_matmul(*operands, group_size).to(x.dtype)
    else:
        out = torch.empty((x2d.shape[0], n), dtype=x.dtype, device=x.device)
        _launch(*operands, out, group_size, config)
    return out.reshape(*x.shape[:-1], n)
