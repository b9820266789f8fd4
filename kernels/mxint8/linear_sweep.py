"""The fused linear's configs swept beyond the autotuner's candidates, any of which the committed
table may choose (``tuning.path_candidates``; kernels/tools/mxint8_sweep.py times them all).

At batch 1 the GEMV kernel (linear_gemv.py): (block_n, block_k, num_warps) x K splits x
pipelining by Triton (3 stages) or by hand (1), and its stream form on N programs per SM. Up to
batch 64 the tile kernel with one row tile: narrow to wide weight tiles, short to long K blocks,
2-5 pipeline stages, K split 1-16, and the mixed-input GEMM (linear_mma.py) with K split 1-8;
from batch 128 the mixed-input GEMM in both orientations. At every batch the warp-specialized
Gluon kernel (linear_ws.py). The tile kernel's sets were timed on
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


# The warp-specialized kernel (linear_ws.py) up to batch 64: "ws" with x's rows as wgmma's N (8 at
# batch 1, where the copy engine fills the missing rows with zeros), (block_n, block_k) giving
# each dequantizing thread 64 values (more spill its registers), deep copy rings, K split 1-8.
_WS_SMALL = [(128, 64)]
_WS_SMALL_STAGES = (4, 8, 12)
_WS_SPLITS = (1, 2, 4, 8)
# From batch 128: (kernel, block_m, block_n, block_k, num_warps, num_stages), 8 multiplying warps
# for 128-row accumulators (two warpgroups), 4 for 64.
_WS_LARGE = [  # each built for sm_90a without spills (kernels/tools/mxint8_hopper_build.py)
    ("ws_plain", 128, 128, 64, 8, 4),
    ("ws_plain", 128, 128, 64, 8, 6),
    ("ws_plain", 256, 128, 64, 8, 3),
    ("ws_plain", 256, 128, 64, 8, 4),
    ("ws_plain", 64, 128, 64, 4, 6),
    ("ws_plain", 128, 128, 64, 4, 6),
    ("ws", 128, 128, 64, 8, 4),
    ("ws", 128, 128, 64, 8, 6),
]
SHARED_MEMORY_LIMIT = 227 * 1024  # a Hopper program's, in bytes


def ws_shared_bytes(config: LinearConfig) -> int:
    """Shared memory of a "ws" config: the copy ring (x and mantissas) and two bf16 tiles."""
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    return config.num_stages * (2 * bm * bk + bn * bk) + 4 * 2 * bn * 64 + 2 * 16 * bn * 8


def ws_configs(bucket: int, k: int) -> list[LinearConfig]:
    configs = []
    for bn, bk in _WS_SMALL if bucket <= 64 else ():
        for stages in _WS_SMALL_STAGES:
            for split in _WS_SPLITS:
                if k >= 2 * split * bk:
                    bm = max(8, bucket)
                    configs.append(LinearConfig(bm, bn, bk, split, 4, stages, kernel="ws"))
    for kernel, bm, bn, bk, warps, stages in _WS_LARGE if bucket > 64 else ():
        configs.append(LinearConfig(bm, bn, bk, 1, warps, stages, kernel=kernel))
    return [c for c in configs if ws_shared_bytes(c) <= SHARED_MEMORY_LIMIT]


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
        return gemv_configs(k) + _BATCH_1_TILES + ws_configs(bucket, k)
    configs = ws_configs(bucket, k)
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
