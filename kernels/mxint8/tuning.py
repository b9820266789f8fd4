"""Choosing how to run one fused-linear problem: the candidate configs, the committed table of
configs per GPU and shape (``linear_configs.json``), Triton's autotuner over the candidates when
asked (``MXINT8_AUTOTUNE=1``), our own record of what ran, and, from DEQUANTIZE_ONCE_MIN_BATCH
rows, dequantize-once instead of the fused kernel.

The config is deterministic by default: the table's entry for this GPU's name and the problem's
(batch bucket, N, K, group size), else ``default_config`` (the first candidate tile with the K
split its shape calls for). Autotuning per process chose different configs in different
processes on the H100 (29.7 vs 33.9 us at 14336x4096 batch 1), so a case's time moved with the
process; the table is chosen once with the suite's own clock (kernels/tools/mxint8_tune.py). The
choice is made once per problem key; later calls launch it directly, since the autotuner's per-call
bookkeeping (pruning, heuristics over ~100 configs) costs ~100 us of host time on an H100 machine.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import torch
import triton
import triton.testing

from kernels.mxint8.format import interpreting
from kernels.mxint8.linear_kernel import mxint8_linear_kernel
from kernels.mxint8.linear_launch import (
    LinearConfig,
    block_meta,
    kernel_arguments,
    kernel_operands,
    launch,
    m_bucket,
    problem_meta,
    split_k_counters,
)
from kernels.mxint8.linear_sweep import sweep_configs

# (block_m, block_n, block_k, num_warps, num_stages) per batch bucket, before the K split.
# block_n is 64 per 4 warps: Hopper's wgmma then takes the weight from registers (measured in
# SASS: narrower tiles fall back to mma.sync and cost 2-5x more instructions per weight).
# Wider GEMV sets (block_k 512, 4-5 stages) were timed on the H100 and never won: docs/NOTES.md.
_TILES_GEMV = [(16, 64, 128, 4, 4), (16, 64, 256, 4, 3), (16, 128, 128, 8, 4), (16, 128, 256, 8, 3)]
_TILES_SMALL = [(64, 128, 128, 8, 4), (64, 64, 128, 4, 4), (64, 128, 256, 8, 3)]
_TILES_LARGE = [
    (128, 64, 64, 4, 4),
    (128, 128, 64, 8, 4),
    (256, 128, 64, 8, 2),  # 3 stages: NaN outputs at group 128 (Triton 3.6, H100)
    (128, 128, 128, 8, 3),
]
_PROGRAMS_PER_SM = 2  # enough tiles in flight to keep HBM busy while the weight streams
# From this batch size the launcher dequantizes the weight once and calls cuBLAS: once the batch
# is large, the dequantization the fused kernel repeats for every row tile costs more than one
# pass over the weight. Measured on the H100 (docs/NOTES.md): the fused kernel wins up to batch
# 128 and loses from 256 on both matrix shapes (4096x4096: 43.9 vs 36.7 us at 256).
DEQUANTIZE_ONCE_MIN_BATCH = 256


# --- Candidate configs ------------------------------------------------------------------------
def _tile_shapes(m: int) -> list[tuple[int, int, int, int, int]]:
    bucket = m_bucket(m)
    if bucket <= 16:  # GEMV-like: the weight read is the whole cost
        return _TILES_GEMV
    if bucket <= 64:
        return [(bucket, *shape[1:]) for shape in _TILES_SMALL]
    return _TILES_LARGE


@functools.cache
def _sm_count() -> int:
    if not torch.cuda.is_available():
        return 132  # an H100's, so configs can be planned without a GPU
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


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


def candidate_configs(m: int, n: int, k: int) -> list[LinearConfig]:
    """The configs the autotuner times for an (m, n, k) problem: a few tile shapes for the batch
    bucket, each with the K split its shape calls for, half that, and, where a split is called
    for and K allows it, double (more, smaller programs even out the SMs' shares)."""
    configs = []  # from the batch bucket alone, so one autotuner key has one candidate set
    for bm, bn, bk, warps, stages in _tile_shapes(m):
        split = _split_k(max(16, m_bucket(m)), n, k, bm, bn, bk)
        splits = {split, max(split // 2, 1)}
        if split > 1 and k >= 2 * 2 * split * bk:
            splits.add(2 * split)
        for s in sorted(splits):
            configs.append(LinearConfig(bm, bn, bk, s, warps, stages))
    return configs


def path_candidates(m: int, n: int, k: int) -> list[LinearConfig]:
    """Every config the table may hold for an (m, n, k) problem, what kernels/tools/mxint8_sweep.py
    times: the tile kernel's autotuner candidates (``candidate_configs``) and linear_sweep.py's
    wider sets (at batch 1 the GEMV kernel in both forms, up to batch 64 more tiles)."""
    configs = candidate_configs(m, n, k) + sweep_configs(m_bucket(m), k)
    return list(dict.fromkeys(configs))  # the first of each, in order


# --- Triton's autotuner -------------------------------------------------------------------------
def as_triton_config(config: LinearConfig) -> triton.Config:
    meta = block_meta(config)
    return triton.Config(meta, num_warps=config.num_warps, num_stages=config.num_stages)


def from_triton_config(config: triton.Config) -> LinearConfig:
    meta = config.kwargs
    block_shape = (meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"], meta["SPLIT_K"])
    return LinearConfig(*block_shape, config.num_warps, config.num_stages, meta["GROUP_M"])


def _all_triton_configs() -> list[triton.Config]:
    shapes = {(b, *s[1:]) for b in (16, 32, 64) for s in _TILES_SMALL} | set(_TILES_GEMV)
    shapes |= set(_TILES_LARGE)
    return [
        as_triton_config(LinearConfig(bm, bn, bk, split, warps, stages))
        for bm, bn, bk, warps, stages in sorted(shapes)
        for split in (1, 2, 4, 8, 16, 32, 64)
    ]


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    wanted = candidate_configs(named_args["M"], named_args["N"], named_args["K"])
    return [c for c in configs if from_triton_config(c) in wanted]


AUTOTUNED_KERNEL = triton.autotune(
    configs=_all_triton_configs(),
    key=["M_BUCKET", "N", "K", "GROUP_SIZE", "HAS_BIAS"],
    prune_configs_by={"early_config_prune": _prune},
    do_bench=lambda fn, quantiles: triton.testing.do_bench(
        fn, warmup=5, rep=20, quantiles=quantiles
    ),  # short runs: ~10 configs a shape, each timed in ~30 ms
)(
    triton.heuristics(
        {name: (lambda args, name=name: kernel_arguments(args)[name]) for name in
         ("k_blocks", "EVEN_K", "K_BLOCKS_INTERPRETED")}
    )(mxint8_linear_kernel)
)  # fmt: skip

# --- The committed table, the default, and what ran ---------------------------------------------
TABLE_PATH = Path(__file__).with_name("linear_configs.json")
AUTOTUNE_VARIABLE = "MXINT8_AUTOTUNE"  # "1": autotune per process instead of the table


def autotune_requested() -> bool:
    return os.environ.get(AUTOTUNE_VARIABLE, "") == "1"


def table_key(m: int, n: int, k: int, group_size: int) -> str:
    """The table's key of a problem: batch bucket x N x K / group size, e.g. '16x4096x4096/32'."""
    return f"{m_bucket(m)}x{n}x{k}/{group_size}"


@functools.cache
def config_table() -> dict[str, dict[str, LinearConfig]]:
    """GPU name -> table key -> config, read once from TABLE_PATH (empty when it is absent)."""
    if not TABLE_PATH.is_file():
        return {}
    raw = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return {
        gpu: {key: LinearConfig(**fields) for key, fields in entries.items()}
        for gpu, entries in raw.get("configs", {}).items()
    }


def device_name(device) -> str:
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def default_config(m: int, n: int, k: int) -> LinearConfig:
    """The config of a problem the table lacks: the bucket's first tile shape with the K split
    its shape calls for (deterministic, never timed)."""
    bm, bn, bk, warps, stages = _tile_shapes(m)[0]
    split = _split_k(max(16, m_bucket(m)), n, k, bm, bn, bk)
    return LinearConfig(bm, bn, bk, split, warps, stages)


# What ran, per (batch bucket, N, K, group size, has bias, device): (config, where it came from).
_tuned: dict[tuple, tuple[LinearConfig, str]] = {}


def _problem_key(m: int, n: int, k: int, group_size: int, has_bias: bool, device) -> tuple:
    return (m_bucket(m), n, k, group_size, has_bias, torch.device(device))


def _chosen(m, n, k, group_size, has_bias) -> tuple[LinearConfig, str] | None:
    for key, choice in _tuned.items():
        if key[:4] == (m_bucket(m), n, k, group_size) and has_bias in (None, key[4]):
            return choice
    return None


def tuned_config(
    m: int, n: int, k: int, group_size: int, has_bias: bool | None = None
) -> LinearConfig | None:
    """The config a problem ran with (with or without a bias when ``has_bias`` says which, on
    any device), else None when it has not run."""
    choice = _chosen(m, n, k, group_size, has_bias)
    return choice[0] if choice else None


def config_source(m: int, n: int, k: int, group_size: int, has_bias: bool | None = None) -> str:
    """Where the config of a problem that ran came from: 'table <gpu>', 'default' (not in the
    table), 'autotuned' (MXINT8_AUTOTUNE=1), or 'not run'."""
    choice = _chosen(m, n, k, group_size, has_bias)
    return choice[1] if choice else "not run"


def _autotune(x2d, mantissa, scales, bias, out, group_size: int) -> LinearConfig:
    """Time the candidate configs of this problem, leaving a result in ``out``; the choice."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    configs = candidate_configs(m, n, k)
    workspace_elements = max(c.workspace_elements(m, n) for c in configs)
    workspace = torch.empty(max(workspace_elements, 1), dtype=torch.float32, device=out.device)
    counters = split_k_counters(out.device, max(c.grid(m, n)[0] for c in configs))

    def grid(meta: dict) -> tuple[int, int]:
        return triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), meta["SPLIT_K"]

    operands = kernel_operands(x2d, mantissa, scales, bias, out, workspace, counters)
    meta = problem_meta(m, bias, group_size)
    AUTOTUNED_KERNEL[grid](*operands, **meta, INTERPRETED=interpreting())
    return from_triton_config(AUTOTUNED_KERNEL.best_config)


def choose_config(m: int, n: int, k: int, group_size: int, device) -> tuple[LinearConfig, str]:
    """(config, source) from the committed table for this GPU, else the default."""
    gpu = device_name(device)
    config = config_table().get(gpu, {}).get(table_key(m, n, k, group_size))
    if config is not None:
        return config, f"table {gpu}"
    return default_config(m, n, k), "default"


def run_tuned(x2d, mantissa, scales, bias, out, group_size: int) -> None:
    """Run the problem's config into ``out``: the table's (or the default) unless
    MXINT8_AUTOTUNE=1 asks to autotune; chosen on the problem's first call, then reused."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    key = _problem_key(m, n, k, group_size, bias is not None, out.device)
    if key not in _tuned and autotune_requested():
        _tuned[key] = (_autotune(x2d, mantissa, scales, bias, out, group_size), "autotuned")
        return
    if key not in _tuned:
        _tuned[key] = choose_config(m, n, k, group_size, out.device)
    launch(x2d, mantissa, scales, bias, out, group_size, _tuned[key][0])


# --- Fused kernel or dequantize-once ------------------------------------------------------------
def chosen_path(m: int, n: int, k: int, group_size: int, has_bias: bool, device) -> str:
    """'fused' or 'dequantize_once' for this problem: on CUDA, fused where the committed table
    has an entry for this GPU and problem (it was measured faster there), else by batch size
    (DEQUANTIZE_ONCE_MIN_BATCH); 'fused' elsewhere."""
    if torch.device(device).type != "cuda" or m < DEQUANTIZE_ONCE_MIN_BATCH:
        return "fused"
    gpu = device_name(device) if torch.cuda.is_available() else None
    in_table = table_key(m, n, k, group_size) in config_table().get(gpu, {})
    return "fused" if in_table else "dequantize_once"


def choose_path(x2d, mantissa, scales, bias, group_size: int) -> str:
    """How to run this problem, 'fused' or 'dequantize_once'. Decided by the batch size, not
    timed per process: a timed choice flipped between processes near the crossover, and with it
    a case's time (seen on the H100 at batch 512: 45.8 us in one process, 61.6 us in the next)."""
    m, k = x2d.shape
    return chosen_path(m, mantissa.shape[0], k, group_size, bias is not None, x2d.device)
