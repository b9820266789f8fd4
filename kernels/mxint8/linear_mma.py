"""The fused linear for large batches: a mixed-input GEMM in the shape Hopper's tensor cores want.

Each program owns one output tile. Its K loop loads the int8 mantissas of a weight tile as they
are stored (contiguous along K, so Triton's pipeline brings them and the activations into shared
memory ``num_stages`` blocks ahead) and turns them into bf16 with one inline-assembly instance
per four values: bytes 0x80 (v = -128, which the spec reads as +0.0) cleared, each byte put under
a 0x43 bf16 exponent and its offset subtracted (v exactly), then one multiplication by the
group's 2^(e - 133) (exact for scales 7..252). No integer-to-float conversion instruction runs.

Two orientations, named by the config's kernel:
- "mma": ``out^T[N, M] = W[N, K] @ x^T[K, M]``. The dequantized weight is the dot's left operand,
  which Hopper's wgmma reads from registers, so the weight goes shared memory -> registers ->
  tensor cores with no write back; x^T is the right operand, from shared memory.
- "mma_plain": ``out[M, N] = x[M, K] @ W^T[K, N]``: the weight is the right operand, which wgmma
  reads from shared memory only, so the dequantized tile is written back there each block.

A program that meets a scale outside 7..252 redoes its share with the spec's six steps (the
tile kernel's ``_accumulate``). K splits meet as in the tile kernel (``finish_split``).
Measured on an H100 at batch 512 (docs/gate-validation/mxint8-session14/round2): "mma" with
256x128x64 tiles 0.64x bf16 ``F.linear`` at 14336x4096 (dequantize-once: 0.60x), "mma_plain"
1.3x slower than "mma"; the conversion's issue cost, not memory, limits it.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.mxint8.linear_kernel import (
    _accumulate,
    _tile_coordinates,
    finish_split,
    store_output,
)
from kernels.mxint8.linear_tile import (
    BYTES_TO_BF16_PAIRS,
    USUAL_SCALE_MAX,
    USUAL_SCALE_MIN,
    expand_groups,
    load_scales,
    widen_bf16,
)

_USUAL_SCALE_MIN = tl.constexpr(USUAL_SCALE_MIN)
_USUAL_SCALE_MAX = tl.constexpr(USUAL_SCALE_MAX)

# Four int8 mantissas ($2) and their four bf16 steps 2^(e-133) as two bf16 pairs ($3: values 0
# and 1, $4: values 2 and 3) -> four bf16 weights as two pairs ($0, $1), as
# linear_tile._WORD_DEQUANTIZE_ASM does for words sharing one step.
_FOUR_VALUES_ASM = tl.constexpr(
    BYTES_TO_BF16_PAIRS + "mul.rn.bf16x2 $0, lo, $3;\nmul.rn.bf16x2 $1, hi, $4;\n}"
)


@triton.jit
def dequantize_values(
    v,
    e,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """bf16 [BLOCK_N, BLOCK_K] from int8 mantissas ``v`` and int32 scales [BLOCK_N, groups] in
    7..252: the spec's values, ``v / 64 * 2^(e - 127)`` and +0.0 for v = -128."""
    if INTERPRETED:  # no inline assembly there: the same values in float32
        step = ((e - 6) << 23).to(tl.float32, bitcast=True)  # float32 2^(e - 133)
        step = expand_groups(step, BLOCK_N, BLOCK_K, GROUP_SIZE)
        w = (tl.where(v == -128, 0, v.to(tl.int32)).to(tl.float32) * step).to(tl.bfloat16)
    else:
        step = ((e - 6) << 7).to(tl.int16).to(tl.bfloat16, bitcast=True)  # bf16 2^(e - 133)
        step = expand_groups(step, BLOCK_N, BLOCK_K, GROUP_SIZE)
        w = tl.inline_asm_elementwise(
            _FOUR_VALUES_ASM, "=r,=r,r,r,r", [v, step], dtype=tl.bfloat16, is_pure=True, pack=4
        )
    return w


@triton.jit
def _accumulate_mma(
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
    WEIGHT_LEFT: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    """(float32 [BLOCK_N, BLOCK_M] = W[offs_n, ks] @ x[offs_m, ks]^T, usual) for ``k_blocks``
    blocks ``ks`` of K from ``k_start``; wrong where ``usual`` is False (a scale outside 7..252).
    [BLOCK_M, BLOCK_N] (its transpose) unless WEIGHT_LEFT."""
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)  # clamped, not masked: see _accumulate
    cols = tl.minimum(offs_m, M - 1).to(tl.int64)
    offs_k = k_start + tl.arange(0, BLOCK_K)
    w_ptrs = mantissa_ptr + rows[:, None] * K + offs_k[None, :]
    if WEIGHT_LEFT:
        x_ptrs = x_ptr + cols[None, :] * stride_xm + offs_k[:, None]  # x^T [BLOCK_K, BLOCK_M]
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        x_ptrs = x_ptr + cols[:, None] * stride_xm + offs_k[None, :]  # x [BLOCK_M, BLOCK_K]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    groups_per_row = K // GROUP_SIZE
    groups: tl.constexpr = (BLOCK_K + GROUP_SIZE - 1) // GROUP_SIZE
    lowest = tl.full((BLOCK_N, groups), 255, tl.int32)
    highest = tl.zeros((BLOCK_N, groups), tl.int32)
    # Triton pipelines the loads that feed the dot, but not these byte loads: fetch a block ahead
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
            xs = tl.load(x_ptrs)
        else:
            k_mask = k0 + tl.arange(0, BLOCK_K) < K
            v = tl.load(w_ptrs, mask=k_mask[None, :], other=0)
            if WEIGHT_LEFT:
                xs = tl.load(x_ptrs, mask=k_mask[:, None], other=0.0)
            else:
                xs = tl.load(x_ptrs, mask=k_mask[None, :], other=0.0)
        lowest = tl.minimum(lowest, e)
        highest = tl.maximum(highest, e)
        w = dequantize_values(v, e, BLOCK_N, BLOCK_K, GROUP_SIZE, INTERPRETED)
        xs = xs.to(tl.bfloat16)
        if INTERPRETED:
            w = widen_bf16(w)
            xs = widen_bf16(xs)
        if WEIGHT_LEFT:
            acc = tl.dot(w, xs, acc)
        else:
            acc = tl.dot(xs, tl.trans(w), acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    usual = (tl.min(lowest) >= _USUAL_SCALE_MIN) & (tl.max(highest) <= _USUAL_SCALE_MAX)
    return acc, usual


@triton.jit(do_not_specialize=["M", "k_blocks", "M_BUCKET"])
def mxint8_mma_kernel(
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
    WEIGHT_LEFT: tl.constexpr,
):
    """One output tile, or its 1/SPLIT_K share of K: the tile kernel's contract
    (linear_kernel.mxint8_linear_kernel), with WEIGHT_LEFT choosing the orientation."""
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coordinates(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_start = pid_k * (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks) * BLOCK_K
    operands = (x_ptr, mantissa_ptr, scales_ptr, offs_m, offs_n, k_start)
    operands += (K_BLOCKS_INTERPRETED if INTERPRETED else k_blocks, M, N, K, stride_xm)
    acc, usual = _accumulate_mma(
        *operands, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, WEIGHT_LEFT, INTERPRETED
    )
    if WEIGHT_LEFT:
        acc_t = acc
    else:
        acc_t = tl.trans(acc)
    if not usual:  # a scale outside 7..252 in this program's share: redo it with the six steps
        acc_t, usual = _accumulate(
            *operands, GROUP_SIZE, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, True, INTERPRETED
        )
    if SPLIT_K == 1:
        store_output(out_ptr, bias_ptr, acc_t, offs_m, offs_n, M, N, stride_om, HAS_BIAS)
    else:
        finish_split(
            out_ptr,
            bias_ptr,
            workspace_ptr,
            counters_ptr,
            acc_t,
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
