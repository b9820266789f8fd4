"""The fused linear's configs swept beyond the autotuner's candidates, any of which the committed
table may choose (``tuning.path_candidates``; kernels/tools/mxint8_sweep.py times them all).

At batch 1 the GEMV kernel (linear_gemv.py): (block_n, block_k, num_warps) x K splits x
pipelining by Triton (3 stages) or by hand (1), and its stream form on N programs per SM. Up to
batch 64 the tile kernel with one row tile: narrow to wide weight tiles, short to long K blocks,
2-5 pipeline stages, K split 1-16, and the mixed-input GEMM (linear_mma.py) with K split 1-8;
from batch 128 the mixed-input GEMM in both orientations. The tile kernel's sets were timed on
an H200 (docs/gate-validation/mxint8-session14), where GEMV tiles of 16 rows and tiles of 128
won.
"""

from __future__ import annotations

from kernels.mxint8.linear_launch import LinearConfig

_GEMV_SHAPES = [(16, 512, 4), (32, 256, 4), (16, 1024, 8), (32, 512, 8), (64, 256, 8)]
_GEMV_SHAPES += [(64, 512, 8), (32, 1024, 8), (128, 256, 8), (8, 512, 4), (8, 1024, 8)]
_GEMV_SHAPES += [(16, 2048, 16), (8, 2048, 16)]
_GEMV_SPLITS = (1, 2, 4)
_GEMV_STAGES = (1, 3)  # 1: the next block fetched into registers by hand
_STREAM_SHAPES = [(16, 512, 4), (32, 256, 4), (32, 512, 8)]
_STREAM_PROGRAMS_PER_SM = {4: (2, 3, 4), 8: (1, 2)}
_BATCH_1_TILES = [LinearConfig(16, 64, 256, split, 4, 3) for split in (1, 2, 4)]
_TILE_SHAPES = [  # (block_n, num_warps, ((block_k, num_stages), ...)) up to batch 64
    (64, 4, ((64, 4), (128, 3), (128, 4), (256, 2), (256, 3), (512, 2))),
    (128, 8, ((64, 4), (128, 3), (128, 4), (256, 2), (256, 3), (512, 2))),
    (256, 8, ((128, 3), (256, 2), (256, 3))),
]
_TILE_SPLITS = (1, 2, 4, 8, 16)
# The mixed-input GEMM (linear_mma.py), (block_n, num_warps, ((block_k, num_stages), ...)) up to
# batch 64: fewer registers than the tile kernel (96 at 16x128x64, 8 warps), so more CTAs an SM.
_MMA_SMALL = [
    (64, 4, ((64, 4), (64, 6), (128, 4), (256, 3))),
    (128, 8, ((64, 4), (64, 6), (128, 4), (256, 3))),
]
_MMA_SPLITS = (1, 2, 4, 8)
# From batch 128: (kernel, block_m, block_n, block_k, num_warps, num_stages, split_k). "mma" takes
# the weight from registers (block_n 64 per 4 warps: one wgmma row block per warp group); the
# dequantization a tile repeats for each of its block_m rows costs less the taller the tile.
_MMA_LARGE = [
    ("mma", 128, 128, 64, 8, 3, 1),
    ("mma", 128, 128, 64, 8, 4, 1),
    ("mma", 128, 128, 128, 8, 3, 1),
    ("mma", 128, 128, 128, 8, 3, 2),
    ("mma", 64, 128, 64, 8, 4, 1),
    ("mma", 64, 128, 128, 8, 3, 1),
    ("mma", 256, 128, 64, 8, 3, 1),
    ("mma", 256, 128, 64, 8, 4, 1),
    ("mma", 256, 128, 64, 8, 2, 1),
    ("mma", 256, 128, 64, 8, 3, 2),
    ("mma", 256, 128, 32, 8, 4, 1),
    ("mma", 256, 128, 32, 8, 5, 1),
    ("mma", 128, 64, 64, 4, 4, 1),
    ("mma", 128, 64, 128, 4, 3, 1),
    ("mma", 128, 64, 128, 4, 3, 2),
    ("mma", 256, 64, 64, 4, 3, 1),
    ("mma_plain", 128, 128, 64, 8, 3, 1),
    ("mma_plain", 128, 128, 64, 8, 4, 1),
    ("mma_plain", 128, 128, 128, 8, 3, 1),
    ("mma_plain", 128, 256, 64, 8, 3, 1),
    ("mma_plain", 64, 128, 64, 4, 4, 1),
    ("mma_plain", 256, 128, 64, 8, 3, 1),
]


def gemv_configs(k: int) -> list[LinearConfig]:
    configs = []
    for bn, bk, warps in _GEMV_SHAPES:
        for split in _GEMV_SPLITS:
            for stages in _GEMV_STAGES if k % (bk * split) == 0 else ():
                configs.append(LinearConfig(1, bn, bk, split, warps, stages, kernel="gemv"))
    for bn, bk, warps in _STREAM_SHAPES:
        for per_sm in _STREAM_PROGRAMS_PER_SM[warps] if k % bk == 0 else ():
            stream = dict(kernel="gemv_stream", programs_per_sm=per_sm)
            configs.append(LinearConfig(1, bn, bk, 1, warps, 3, **stream))
    return configs


def sweep_configs(bucket: int, k: int) -> list[LinearConfig]:
    """The swept configs of a batch bucket (``linear_launch.m_bucket``) and K."""
    if bucket == 1:
        return gemv_configs(k) + _BATCH_1_TILES
    configs = []
    for bn, warps, block_ks in _TILE_SHAPES if bucket <= 64 else ():
        for bk, stages in block_ks:
            for split in _TILE_SPLITS:
                if k >= 2 * split * bk:
                    configs.append(LinearConfig(bucket, bn, bk, split, warps, stages))
    for bn, warps, block_ks in _MMA_SMALL if bucket <= 64 else ():
        for bk, stages in block_ks:
            for split in _MMA_SPLITS:
                if k >= 2 * split * bk:
                    mma = LinearConfig(bucket, bn, bk, split, warps, stages, kernel="mma")
                    configs.append(mma)
    for kernel, bm, bn, bk, warps, stages, split in _MMA_LARGE if bucket > 64 else ():
        if k >= 2 * split * bk:
            configs.append(LinearConfig(bm, bn, bk, split, warps, stages, kernel=kernel))
    return configs
