"""Fused MXINT8 linear: ``y = x @ W^T + b`` with ``W`` read as MXINT8 and dequantized in registers.

The lab's layer dequantizes the whole weight to bf16 and then calls ``F.linear``; this kernel reads
the int8 mantissas and their scales tile by tile, rebuilds each tile's bf16 values in registers and
feeds them to ``tl.dot`` with a float32 accumulator, so the weight crosses memory once, at 8 + 8/G
bits per value. ``../shared/MXINT8.md`` is the format; ``docs/NOTES.md`` explains the design.

Layers, top to bottom: constants, the dequantization of one tile, the Triton kernel and its
helpers, block-size configurations and the autotuner, input checks, the PyTorch reference, and
the launcher ``mxint8_linear``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels.mxint8 import (
    DEFAULT_GROUP_SIZE,
    _check_group_size,
    _dequantize_bits,
    _describe,
    dequantize_reference,
    triton_available_for,
)

# --- Constants --------------------------------------------------------------------------------
# Scales whose tile values the three-instruction path below rebuilds bit for bit; tiles holding
# any other scale (or a -128 mantissa) take the spec's six steps in `_dequantize_bits`.
USUAL_SCALE_MIN = 7  # below, v/64 * 2^(e-127) can be a bf16 subnormal
USUAL_SCALE_MAX = 252  # above, the float32 "magic" exponent e + 2 would pass 254
_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)
# Scale read for masked-off groups: a usual one, so ragged tails keep the fast path
_NEUTRAL_SCALE = tl.constexpr(127)
_MANTISSA_MIN = tl.constexpr(-128)  # the one mantissa the spec maps to +0.0 instead of v/64
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
BIAS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --- Dequantizing one weight tile -------------------------------------------------------------
@triton.jit
def _dequantize_usual(v, e):
    """bf16 of ``v / 64 * 2^(e - 127)`` for int32 mantissas in -127..127 and scales in 7..252.

    Bit-identical to the spec's six steps there (tests/test_mxint8_linear.py checks every pair),
    in three instructions a value instead of ~20: the mantissa goes into the top fraction bits of
    a float32 whose exponent comes from the scale, and one subtraction removes the offset.
    """
    # float32 bits (e + 2) << 23 | (v + 128) << 15 hold 2^(e-125) * (1 + (v + 128) / 256)
    magic = ((e + 2) << 23) | (128 << 15)
    shifted = (v * 32768 + magic).to(tl.float32, bitcast=True)
    # Both terms lie in one binade, so the difference v * 2^(e-133) is exact, and so is the cast
    # (at most 7 significant bits, a float32 normal since e >= 7)
    return (shifted - magic.to(tl.float32, bitcast=True)).to(tl.bfloat16)


@triton.jit
def _expand_groups(e, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Per-group scales [BLOCK_N, groups] -> one per value [BLOCK_N, BLOCK_K] (or [BLOCK_N, 1])."""
    if GROUP_SIZE >= BLOCK_K:
        return e  # one group spans the tile: [BLOCK_N, 1] broadcasts along K
    groups: tl.constexpr = BLOCK_K // GROUP_SIZE
    return tl.reshape(
        tl.broadcast_to(e[:, :, None], (BLOCK_N, groups, GROUP_SIZE)), (BLOCK_N, BLOCK_K)
    )


@triton.jit
def _dequantize_tile(v, e, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """bf16 [BLOCK_N, BLOCK_K] from int32 mantissas and int32 per-group scales, as the spec says."""
    usual = (tl.min(v) > _MANTISSA_MIN) & (tl.min(e) >= _USUAL_SCALE_MIN)
    usual = usual & (tl.max(e) <= _USUAL_SCALE_MAX)
    e = _expand_groups(e, BLOCK_N, BLOCK_K, GROUP_SIZE)
    if usual:
        w = _dequantize_usual(v, e)
    else:
        w = _dequantize_bits(v, e).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return w


@triton.jit
def _load_scales(
    scales_ptr, rows, n_mask, k0, groups_per_row, BLOCK_K: tl.constexpr, GROUP_SIZE: tl.constexpr
):
    """int32 scales of the groups in columns [k0, k0 + BLOCK_K) of ``rows``: [BLOCK_N, groups]."""
    if GROUP_SIZE >= BLOCK_K:
        offs_g = k0 // GROUP_SIZE + tl.arange(0, 1)
    else:
        offs_g = k0 // GROUP_SIZE + tl.arange(0, BLOCK_K // GROUP_SIZE)
    mask = n_mask[:, None] & (offs_g[None, :] < groups_per_row)
    e = tl.load(
        scales_ptr + rows[:, None] * groups_per_row + offs_g[None, :],
        mask=mask,
        other=_NEUTRAL_SCALE,
    )
    return e.to(tl.int32)


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
def _widen_bf16(t):
    """float32 of bf16 ``t`` by a 16-bit shift, for the interpreter's dot.

    Triton 3.6's interpreter holds bf16 as raw uint16 and its dot multiplies those integers; its
    own bf16 -> float32 cast also gets subnormals wrong. The shift is exact everywhere.
    """
    return (t.to(tl.uint16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _accumulate(
    x_ptr,
    mantissa_ptr,
    scales_ptr,
    offs_m,
    offs_n,
    k_start,
    M,
    N,
    K,
    stride_xm,
    GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    K_BLOCKS: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """float32 [BLOCK_N, BLOCK_M] = W[offs_n, K range] @ x[offs_m, K range]^T.

    The K range is the K_BLOCKS blocks from ``k_start``, masked at K.
    """
    # The weight tile is the dot's left operand: Hopper's wgmma then takes it from the registers
    # it was dequantized in, and a batch of 1-16 pads only the narrow right operand.
    rows = offs_n.to(tl.int64)  # N * K can pass 2^31
    n_mask = offs_n < N
    m_mask = offs_m < M
    offs_k = k_start + tl.arange(0, BLOCK_K)
    w_ptrs = mantissa_ptr + rows[:, None] * K + offs_k[None, :]
    x_ptrs = x_ptr + offs_m.to(tl.int64)[None, :] * stride_xm + offs_k[:, None]
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(K_BLOCKS):
        k0 = k_start + i * BLOCK_K
        k_mask = k0 + tl.arange(0, BLOCK_K) < K
        v = tl.load(w_ptrs, mask=n_mask[:, None] & k_mask[None, :], other=0)
        e = _load_scales(scales_ptr, rows, n_mask, k0, K // GROUP_SIZE, BLOCK_K, GROUP_SIZE)
        w = _dequantize_tile(v.to(tl.int32), e, BLOCK_N, BLOCK_K, GROUP_SIZE)
        x_t = tl.load(x_ptrs, mask=k_mask[:, None] & m_mask[None, :], other=0.0)
        x_t = x_t.to(tl.bfloat16)
        if INTERPRETED:
            acc = tl.dot(_widen_bf16(w), _widen_bf16(x_t), acc)
        else:
            acc = tl.dot(w, x_t, acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    return acc


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
def _sum_of_splits(
    workspace_ptr,
    tile,
    num_tiles,
    SPLIT_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """The SPLIT_K partial tiles of ``tile`` summed in split order (deterministic)."""
    local = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):
        slot = (split * num_tiles + tile).to(tl.int64) * (BLOCK_N * BLOCK_M)
        total += tl.load(workspace_ptr + slot + local, cache_modifier=".cg")  # skip stale L1
    return total


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
    """Store this split's partial tile; the tile's last split to arrive sums all and stores."""
    num_tiles = tl.num_programs(0)
    local = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
    slot = (pid_k * num_tiles + tile).to(tl.int64) * (BLOCK_N * BLOCK_M)
    tl.store(workspace_ptr + slot + local, acc)
    tl.debug_barrier()  # every thread's partial is written before the release below
    arrived = tl.atomic_add(counters_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:
        total = _sum_of_splits(workspace_ptr, tile, num_tiles, SPLIT_K, BLOCK_N, BLOCK_M)
        _store_output(out_ptr, bias_ptr, total, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
        tl.atomic_xchg(counters_ptr + tile, 0, sem="relaxed", scope="gpu")  # ready for next call


@triton.jit(do_not_specialize=["M", "M_BUCKET"])
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
    M_BUCKET,
    GROUP_SIZE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    INTERPRETED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    K_BLOCKS: tl.constexpr,
):
    """One [BLOCK_M, BLOCK_N] output tile, or its 1/SPLIT_K share of K.

    Grid: (output tiles, SPLIT_K). Each program covers K_BLOCKS blocks of K; ``M_BUCKET`` only
    keys the autotuner. Split programs meet through ``workspace`` and ``counters`` (all zero
    between launches: the last program of each tile resets its counter).
    """
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coordinates(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_start = pid_k * (K_BLOCKS * BLOCK_K)  # whole blocks, so a group never straddles splits
    acc = _accumulate(
        x_ptr,
        mantissa_ptr,
        scales_ptr,
        offs_m,
        offs_n,
        k_start,
        M,
        N,
        K,
        stride_xm,
        GROUP_SIZE,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        K_BLOCKS,
        INTERPRETED,
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


def _k_blocks(args: dict) -> int:
    """K blocks per split: the loop's trip count, a constant so the interpreter can run it."""
    return triton.cdiv(triton.cdiv(args["K"], args["SPLIT_K"]), args["BLOCK_K"])


_mxint8_linear = triton.heuristics({"K_BLOCKS": _k_blocks})(_mxint8_linear_kernel)


# --- Configurations ---------------------------------------------------------------------------
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


# Under TRITON_INTERPRET=1 (CPU CI) one config, no tuning: big enough to keep the interpreter's
# per-program overhead low, small enough that test shapes of ~100 cover several tiles and tails.
INTERPRETER_CONFIG = LinearConfig(block_m=16, block_n=32, block_k=64, split_k=1)
SPLIT_K_CHOICES = (1, 2, 4, 8)
_TARGET_PROGRAMS_PER_SM = 2  # enough loads in flight to keep HBM busy at small batch


def _m_bucket(m: int) -> int:
    """Batch sizes that share a tuned config: powers of two from 16 up to 256, then 256s."""
    return max(16, min(triton.next_power_of_2(m), 256)) if m <= 256 else 256 * triton.cdiv(m, 256)


def _tile_shapes(m_bucket: int) -> list[tuple[int, int, int, int]]:
    """(block_m, block_n, block_k, num_warps) candidates for a batch bucket, before the K split."""
    if m_bucket <= 16:  # GEMV-like: the weight read is the whole cost
        return [(16, bn, bk, 4) for bn in (16, 32, 64) for bk in (128, 256)]
    if m_bucket <= 64:
        return [(m_bucket, bn, bk, 4) for bn in (32, 64) for bk in (128, 256)]
    return [(bm, bn, 64, w) for bm, bn, w in ((128, 64, 4), (128, 128, 8), (256, 128, 8))] + [
        (bm, bn, 128, w) for bm, bn, w in ((128, 64, 4), (128, 128, 8))
    ]


def _choose_split_k(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int) -> int:
    """Smallest split that gives every SM a few programs, keeping >= 2 K blocks per program."""
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    target = _TARGET_PROGRAMS_PER_SM * _sm_count()
    for split in SPLIT_K_CHOICES:
        if tiles * split >= target or triton.cdiv(k, split * 2) < block_k:
            return split
    return SPLIT_K_CHOICES[-1]


@functools.cache
def _sm_count() -> int:
    if not torch.cuda.is_available():
        return 132  # an H100's, for planning without a GPU
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def candidate_configs(m: int, n: int, k: int) -> list[LinearConfig]:
    """The configs the autotuner times for an (m, n, k) problem: a few tile shapes per batch
    bucket, each with the K split chosen for the shape, two pipeline depths."""
    configs = []
    for bm, bn, bk, warps in _tile_shapes(_m_bucket(m)):
        split = _choose_split_k(m, n, k, bm, bn, bk)
        for stages in (3, 4):
            configs.append(LinearConfig(bm, bn, bk, split, warps, stages))
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
    kw = config.kwargs
    return LinearConfig(
        kw["BLOCK_M"],
        kw["BLOCK_N"],
        kw["BLOCK_K"],
        kw["SPLIT_K"],
        config.num_warps,
        config.num_stages,
        kw["GROUP_M"],
    )


def _all_triton_configs() -> list[triton.Config]:
    shapes = {s for bucket in (16, 32, 64, 256) for s in _tile_shapes(bucket)}
    return [
        _as_triton_config(LinearConfig(bm, bn, bk, split, warps, stages))
        for bm, bn, bk, warps in sorted(shapes)
        for split in SPLIT_K_CHOICES
        for stages in (3, 4)
    ]


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = candidate_configs(named_args["M"], named_args["N"], named_args["K"])
    return [c for c in configs if _from_triton_config(c) in wanted]


_mxint8_linear_autotuned = triton.autotune(
    configs=_all_triton_configs(),
    key=["M_BUCKET", "N", "K", "GROUP_SIZE"],
    prune_configs_by={"early_config_prune": _prune},
    warmup=5,
    rep=20,
)(_mxint8_linear)


def tuned_config(m: int, n: int, k: int, group_size: int) -> LinearConfig | None:
    """The autotuner's choice for a problem it has tuned, else None."""
    for key, config in _mxint8_linear_autotuned.cache.items():
        if tuple(key[:4]) == (_m_bucket(m), n, k, group_size):
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
            f"scales must have shape [N, K // group_size] = {(n, k // group_size)}, "
            f"got {tuple(scales.shape)}"
        )
    if x.dim() == 0 or x.shape[-1] != k:
        raise ValueError(f"x's last dimension must be K = {k}, got shape {tuple(x.shape)}")
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"bias must have shape [N] = ({n},), got {tuple(bias.shape)}")
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
            "dequantize-then-linear (MXINT8Linear(fused=False)) handles any group size"
        )


def fused_linear_supported(x: torch.Tensor, group_size: int) -> bool:
    """True when ``mxint8_linear`` would run its Triton kernel for ``x`` and ``group_size``."""
    return (
        x.dtype in ACTIVATION_DTYPES
        and triton_available_for(x.device)
        and isinstance(group_size, int)
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
_counters: dict[torch.device, torch.Tensor] = {}


def _split_k_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed int32 arrival counters, one per output tile, kept zeroed by the kernel itself.

    One buffer per device, shared by every launch on it: split-K launches of this kernel on
    two streams at once would race on it (run them on one stream).
    """
    counters = _counters.get(device)
    if counters is None or counters.numel() < tiles:
        counters = torch.zeros(max(tiles, 4096), dtype=torch.int32, device=device)
        _counters[device] = counters
    return counters


def _launch(x2d, mantissa, scales, bias, out, group_size, config: LinearConfig | None) -> None:
    """Run the kernel on 2-D ``x2d`` [M, K] into ``out`` [M, N]: ``config`` or the autotuner's."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    configs = [config] if config is not None else candidate_configs(m, n, k)
    workspace_elements = max(c.workspace_elements(m, n) for c in configs)
    workspace = torch.empty(max(workspace_elements, 1), dtype=torch.float32, device=out.device)
    counters = _split_k_counters(out.device, max(c.grid(m, n)[0] for c in configs))
    args = (
        x2d,
        mantissa,
        scales,
        bias if bias is not None else out,
        out,
        workspace,
        counters,
        m,
        n,
        k,
        x2d.stride(0),
        out.stride(0),
        _m_bucket(m),
    )
    common = dict(GROUP_SIZE=group_size, HAS_BIAS=bias is not None, INTERPRETED=_interpreting())
    if config is None:
        grid = lambda meta: (  # noqa: E731
            triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),
            meta["SPLIT_K"],
        )
        _mxint8_linear_autotuned[grid](*args, **common)
        return
    _mxint8_linear[config.grid(m, n)](
        *args,
        **common,
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=config.split_k,
        GROUP_M=config.group_m,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


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
    ``group_size`` consecutive values along K; ``group_size`` must be a power of two (others:
    use dequantize-then-``F.linear``). ``x`` is [..., K] in bfloat16, float16 or float32; ``bias``
    None or [N] in a float dtype. The result is [..., N] in x's dtype.

    The weight is rebuilt exactly as ``dequantize`` does (bf16, bit for bit), multiplied on
    bf16 tensor cores, accumulated in float32. So float16 activations are rounded to bfloat16
    inside the kernel, and float32 activations are cast to bfloat16 before it (the output stays
    float32): expect bf16-level agreement, ~1e-3 relative, with a float32 ``F.linear``.

    CUDA tensors run the Triton kernel, block sizes autotuned per (batch bucket, N, K, group)
    unless ``config`` fixes them; CPU tensors run it through Triton's interpreter when
    ``TRITON_INTERPRET=1``, else ``mxint8_linear_reference``.
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
    if config is None and x.device.type == "cpu":
        config = INTERPRETER_CONFIG  # the interpreter never autotunes
    out = torch.empty((x2d.shape[0], n), dtype=x.dtype, device=x.device)
    _launch(x2d, mantissa.contiguous(), scales.contiguous(), bias, out, group_size, config)
    return out.reshape(*x.shape[:-1], n)
