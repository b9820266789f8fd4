"""Launching the fused linear kernel with one given config, and the dequantize-once alternative.

``LinearConfig`` names the block sizes, K split, warps and pipeline depth of a launch;
``launch`` runs the kernel with one into a preallocated output. Choosing the config is tuning.py's
job, the public entry point is linear.py's ``mxint8_linear``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton

from kernels.mxint8.dequantize_kernel import dequantize
from kernels.mxint8.format import interpreting
from kernels.mxint8.linear_gemv import mxint8_gemv_kernel
from kernels.mxint8.linear_gemv_stream import mxint8_gemv_stream_kernel
from kernels.mxint8.linear_kernel import mxint8_linear_kernel
from kernels.mxint8.linear_mma import mxint8_mma_kernel

KERNELS = {
    "tile": mxint8_linear_kernel,
    "gemv": mxint8_gemv_kernel,
    "gemv_stream": mxint8_gemv_stream_kernel,
    "mma": mxint8_mma_kernel,
    "mma_plain": mxint8_mma_kernel,
}


@dataclass(frozen=True)
class LinearConfig:
    """Block sizes, K split, warps and pipeline depth of one launch of the fused kernel, and
    which kernel: "tile" (tensor cores; linear_kernel.py), "gemv" (CUDA cores, one row of x
    per program; linear_gemv.py), "gemv_stream" (the GEMV on ``programs_per_sm``
    persistent programs per SM; linear_gemv_stream.py), or "mma" / "mma_plain" (the mixed-input
    GEMM computing out^T = W @ x^T or out = x @ W^T; linear_mma.py)."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    kernel: str = "tile"
    programs_per_sm: int = 0  # gemv_stream only

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel={self.kernel!r}: use one of {', '.join(KERNELS)}")
        if self.kernel.startswith("gemv") and self.block_m != 1:
            raise ValueError(f"a gemv config takes one row of x: block_m=1, not {self.block_m}")
        if self.kernel == "gemv_stream" and self.split_k != 1:
            raise ValueError(
                f"a gemv_stream config does not split K: split_k=1, not {self.split_k}"
            )
        if (self.kernel == "gemv_stream") != (self.programs_per_sm > 0):
            raise ValueError("programs_per_sm > 0 exactly for a gemv_stream config")

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


def m_bucket(m: int) -> int:
    """Batch sizes that share a tuned config: 1 (a GEMV), 16 (2-16), 32, 64, 128, 256, then
    multiples of 256."""
    if m <= 1:
        return 1
    return max(16, triton.next_power_of_2(m)) if m <= 256 else 256 * triton.cdiv(m, 256)


def kernel_arguments(args: dict) -> dict:
    """Per-config arguments: the loop's trip count and whether K needs masks."""
    k, block_k, split_k = args["K"], args["BLOCK_K"], args["SPLIT_K"]
    k_blocks = triton.cdiv(triton.cdiv(k, split_k), block_k)
    return dict(
        k_blocks=k_blocks,
        EVEN_K=k % (block_k * split_k) == 0,  # every split covers whole blocks inside K
        K_BLOCKS_INTERPRETED=k_blocks if args["INTERPRETED"] else 0,  # 0: one binary on GPUs
    )


_counters: dict[torch.device, torch.Tensor] = {}


def split_k_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed int32 arrival counters, one per output tile, kept zeroed by the kernel itself.

    One buffer per device, shared by every launch on it: split-K launches of this kernel on two
    streams at once would race on it (run them on one stream).
    """
    counters = _counters.get(device)
    if counters is None or counters.numel() < tiles:
        counters = torch.zeros(max(tiles, 4096), dtype=torch.int32, device=device)
        _counters[device] = counters
    return counters


def kernel_operands(x2d, mantissa, scales, bias, out, workspace, counters) -> tuple:
    """The kernel's positional arguments; without a bias, ``out`` stands in (never read)."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    bias_or_out = bias if bias is not None else out
    strides = (x2d.stride(0), out.stride(0))
    return (x2d, mantissa, scales, bias_or_out, out, workspace, counters, m, n, k, *strides)


def problem_meta(m: int, bias, group_size: int) -> dict:
    """Constexpr and key arguments shared by every config of a problem."""
    return dict(M_BUCKET=m_bucket(m), GROUP_SIZE=group_size, HAS_BIAS=bias is not None)


def block_meta(config: LinearConfig) -> dict:
    """The kernel's block-shape meta-parameters of ``config`` (shared with the autotuner)."""
    return dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=config.split_k,
        GROUP_M=config.group_m,
    )


@functools.lru_cache(maxsize=1024)
def launch_plan(config: LinearConfig, m: int, n: int, k: int, interpreted: bool):
    """(grid, keyword arguments) of one launch: block sizes, loop trip count, K masking."""
    meta = dict(
        **block_meta(config),
        INTERPRETED=interpreted,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    meta.update(kernel_arguments(dict(meta, K=k)))
    return config.grid(m, n), meta


# What a gemv config runs as where the GEMV kernel cannot: the first GEMV tile, no split.
GEMV_FALLBACK = LinearConfig(16, 64, 128, 1, 4, 4)


def gemv_fits(x2d, config: LinearConfig, group_size: int) -> bool:
    """Whether the GEMV kernel takes this problem: bf16 x whose rows are whole int64 words,
    scale groups of whole words, and every K split a whole number of blocks."""
    k = x2d.shape[1]
    return (
        x2d.dtype == torch.bfloat16
        and x2d.data_ptr() % 8 == 0
        and x2d.stride(0) % 4 == 0
        and group_size >= 4
        and k % (config.block_k * config.split_k) == 0
    )


def launch(x2d, mantissa, scales, bias, out, group_size: int, config: LinearConfig):
    """Run the kernel with ``config`` on 2-D ``x2d`` [M, K] (bf16 or fp16, unit stride along K)
    into ``out`` [M, N]; ``mantissa`` and ``scales`` contiguous. A "gemv" config that does not
    fit the problem (``gemv_fits``) runs as GEMV_FALLBACK. Returns the compiled kernel."""
    m, k = x2d.shape
    n = mantissa.shape[0]
    if config.kernel.startswith("gemv") and not gemv_fits(x2d, config, group_size):
        config = GEMV_FALLBACK
    grid, meta = launch_plan(config, m, n, k, interpreting())
    workspace_elements = config.workspace_elements(m, n)
    counters = split_k_counters(out.device, grid[0])
    if config.kernel == "gemv_stream":
        grid = (stream_programs(config, m, n, k, out.device),)
        workspace_elements = 2 * grid[0] * config.block_n
        counters = split_k_counters(out.device, m * triton.cdiv(n, config.block_n))
    workspace = torch.empty(max(workspace_elements, 1), dtype=torch.float32, device=out.device)
    if config.kernel.startswith("gemv"):  # its loop is pipelined by tl.range, not by the launch
        meta = dict(meta, NUM_STAGES=config.num_stages)
    if config.kernel.startswith("mma"):
        meta = dict(meta, WEIGHT_LEFT=config.kernel == "mma")
    args = kernel_operands(x2d, mantissa, scales, bias, out, workspace, counters)
    return KERNELS[config.kernel][grid](*args, **problem_meta(m, bias, group_size), **meta)


def stream_programs(config: LinearConfig, m: int, n: int, k: int, device) -> int:
    """Programs of a gemv_stream launch: programs_per_sm per SM (3 SMs in the interpreter),
    at most one per K block of work."""
    sms = 3
    if torch.device(device).type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    work = m * triton.cdiv(n, config.block_n) * (k // config.block_k)
    return max(1, min(config.programs_per_sm * sms, work))


def dequantize_then_matmul(x2d, mantissa, scales, bias, group_size: int) -> torch.Tensor:
    """The lab's way, in bf16 like the kernel: one dequantization pass, then cuBLAS."""
    weight = dequantize(mantissa, scales, group_size)
    bias = None if bias is None else bias.to(torch.bfloat16)
    return F.linear(x2d.to(torch.bfloat16), weight, bias)
