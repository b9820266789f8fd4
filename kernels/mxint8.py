"""MXINT8: quantizer, PyTorch reference dequantizer, Triton dequantization kernel, and a Linear.

The dequantizer mirrors the CuTe kernel of mase-cuda (``src/csrc/mxint/dequantize.cuh``) bit for
bit, special scales included; ``../shared/MXINT8.md`` is the specification. Layers, top to bottom:
format constants, input checks, the reference, the Triton kernel and its launcher, the quantizer,
and ``MXINT8Linear``.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

# --- Format constants -------------------------------------------------------------------------
DEFAULT_GROUP_SIZE = 32  # values sharing one scale (OCP MX block size)
SCALE_BIAS = 127  # the scale byte is a biased exponent, like E8M0 and float32's exponent
SCALE_NAN_INF = 255  # scale byte whose outputs are all inf or NaN (the CuTe kernel's behaviour)
MANTISSA_FRACTION_BITS = 6  # int8 mantissa = sign, one integer bit, six fraction bits
MANTISSA_MAX = 127  # largest magnitude the quantizer writes; -128 never appears
BF16_SIGN_BIT = 0x8000
BF16_EXPONENT_SHIFT = 7  # bf16 = 1 sign, 8 exponent, 7 fraction bits
INTEGER_BIT = 0x40  # the mantissa's integer bit: set means bf16's implicit leading 1 is right
FRACTION_MASK = 0x3F  # the mantissa's six fraction bits
FLOAT32_SMALLEST_NORMAL = 2.0**-126  # bf16 shares it; the quantizer flushes anything smaller
DEQUANTIZE_BLOCK_SIZE = 2048  # elements per Triton program (tuned on the H100: docs/NOTES.md)
DEQUANTIZE_NUM_WARPS = 4


# --- Input checks (at the wrapper, never in the kernel) ---------------------------------------
def _check_group_size(group_size: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError(f"group_size must be an int, got {type(group_size).__name__}")
    if group_size <= 0:
        raise ValueError(f"group_size must be positive, got {group_size}")


def _check_dequantize_inputs(mantissa: torch.Tensor, scales: torch.Tensor, group_size: int) -> None:
    if not isinstance(mantissa, torch.Tensor) or mantissa.dtype != torch.int8:
        raise TypeError(f"mantissa must be an int8 tensor, got {_describe(mantissa)}")
    if not isinstance(scales, torch.Tensor) or scales.dtype != torch.uint8:
        raise TypeError(f"scales must be a uint8 tensor, got {_describe(scales)}")
    _check_group_size(group_size)
    if mantissa.numel() % group_size != 0:
        raise ValueError(
            f"mantissa has {mantissa.numel()} elements, not a multiple of group_size={group_size}"
        )
    expected_scales = mantissa.numel() // group_size
    if scales.numel() != expected_scales:
        raise ValueError(
            f"scales has {scales.numel()} elements but mantissa needs {expected_scales} "
            f"({mantissa.numel()} elements / group_size {group_size})"
        )
    if mantissa.device != scales.device:
        raise ValueError(
            f"mantissa and scales must be on one device, got mantissa on {mantissa.device} "
            f"and scales on {scales.device}"
        )


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor"
    return type(value).__name__


# --- Reference: the spec's six steps in plain PyTorch, any device -----------------------------
def _bits_to_bfloat16(bits: torch.Tensor) -> torch.Tensor:
    """Reinterpret the low 16 bits of an int32 tensor as bfloat16."""
    signed = bits - ((bits & BF16_SIGN_BIT) << 1)  # 0..0xFFFF -> -32768..32767, same bits
    return signed.to(torch.int16).view(torch.bfloat16)


def dequantize_reference(
    mantissa: torch.Tensor, scales: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> torch.Tensor:
    """MXINT8 -> bfloat16 in plain PyTorch, bit-exact with the CuTe kernel (NaN payloads aside).

    Groups are consecutive runs of ``group_size`` elements in row-major order; ``scales`` holds
    one biased exponent per group. The output has ``mantissa``'s shape.
    """
    _check_dequantize_inputs(mantissa, scales, group_size)
    v = mantissa.reshape(-1, group_size).to(torch.int32)
    e = scales.reshape(-1, 1).to(torch.int32)
    sign = torch.where(v < 0, BF16_SIGN_BIT, 0)
    expo = e << BF16_EXPONENT_SHIFT
    a = v.abs()  # in int32, so |-128| = 128
    frac = (a & FRACTION_MASK) << 1
    out = _bits_to_bfloat16(sign | expo | frac)
    bias = _bits_to_bfloat16(sign | expo)
    without_implicit_one = (out.float() - bias.float()).to(torch.bfloat16)
    y = torch.where((a & INTEGER_BIT) != 0, out, without_implicit_one)
    return y.reshape(mantissa.shape)


# --- Triton kernel ----------------------------------------------------------------------------
@triton.jit
def _dequantize_bits(v, e):
    """bf16 bit patterns (in int32) for int32 mantissas ``v`` and scales ``e``: the spec's steps."""
    sign = tl.where(v < 0, 0x8000, 0)
    a = tl.abs(v)  # in int32, so |-128| = 128
    out = sign | (e << 7) | ((a & 0x3F) << 1)
    bias = sign | (e << 7)
    # Step 6 in float32 on bf16 patterns widened by hand (bf16 -> f32 is a 16-bit shift, which
    # Triton's interpreter gets wrong for subnormals when it converts). The difference is exact
    # in bf16, so its top 16 bits are the result; inf - inf and NaN - inf give a NaN.
    out_f32 = (out << 16).to(tl.float32, bitcast=True)
    bias_f32 = (bias << 16).to(tl.float32, bitcast=True)
    difference = (out_f32 - bias_f32).to(tl.int32, bitcast=True) >> 16
    # bf16 has an implicit leading 1 that MXINT8 lacks: remove it unless the integer bit is set
    return tl.where((a & 0x40) != 0, out, difference)


@triton.jit
def _dequantize_kernel(
    mantissa_ptr,
    scales_ptr,
    out_ptr,
    n_elements,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    GROUP_TILES: tl.constexpr,
):
    # The block start is int64 so tensors past 2^31 elements index correctly; offsets inside a
    # block stay int32.
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    remaining = tl.minimum(n_elements - start, BLOCK_SIZE).to(tl.int32)
    if GROUP_TILES:
        # A (groups, GROUP_SIZE) tile: one scale load per group, broadcast along its row.
        rows = tl.arange(0, BLOCK_SIZE // GROUP_SIZE)
        local = rows[:, None] * GROUP_SIZE + tl.arange(0, GROUP_SIZE)[None, :]
        e = tl.load(scales_ptr + start // GROUP_SIZE + rows, mask=rows * GROUP_SIZE < remaining)
        e = e.to(tl.int32)[:, None]
    else:
        # Any group size: each element finds its group's scale.
        local = tl.arange(0, BLOCK_SIZE)
        e = tl.load(scales_ptr + (start + local) // GROUP_SIZE, mask=local < remaining)
        e = e.to(tl.int32)
    mask = local < remaining
    v = tl.load(mantissa_ptr + start + local, mask=mask, other=0).to(tl.int32)
    bits = _dequantize_bits(v, e)
    tl.store(out_ptr + start + local, bits.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)


def _uses_group_tiles(group_size: int, block_size: int) -> bool:
    """Power-of-two groups that tile a block take the one-scale-load-per-group path."""
    return group_size & (group_size - 1) == 0 and group_size <= block_size


def triton_available_for(device: torch.device) -> bool:
    """True when the Triton kernels can run on ``device``: CUDA, or CPU under TRITON_INTERPRET=1."""
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def dequantize(
    mantissa: torch.Tensor, scales: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> torch.Tensor:
    """MXINT8 -> bfloat16 by the Triton kernel: the contract and bits of ``dequantize_reference``.

    On CUDA tensors it launches the Triton kernel. On CPU tensors it runs the same kernel through
    Triton's interpreter when ``TRITON_INTERPRET=1`` was set before import, else the reference.
    """
    _check_dequantize_inputs(mantissa, scales, group_size)
    if not triton_available_for(mantissa.device):
        return dequantize_reference(mantissa, scales, group_size)
    out = torch.empty(mantissa.shape, dtype=torch.bfloat16, device=mantissa.device)
    n_elements = mantissa.numel()
    if n_elements == 0:
        return out
    grid = (triton.cdiv(n_elements, DEQUANTIZE_BLOCK_SIZE),)
    _dequantize_kernel[grid](
        mantissa.contiguous(),
        scales.contiguous(),
        out,
        n_elements,
        GROUP_SIZE=group_size,
        BLOCK_SIZE=DEQUANTIZE_BLOCK_SIZE,
        GROUP_TILES=_uses_group_tiles(group_size, DEQUANTIZE_BLOCK_SIZE),
        num_warps=DEQUANTIZE_NUM_WARPS,
    )
    return out


# --- Quantizer (mase-cuda's simulated quantizer) ----------------------------------------------
QUANTIZE_INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def quantize(
    w: torch.Tensor, group_size: int = DEFAULT_GROUP_SIZE
) -> tuple[torch.Tensor, torch.Tensor]:
    """FP32/BF16/FP16 -> MXINT8 ``(mantissa int8 of w's shape, scales uint8)``.

    Groups run along the last dimension, so ``w.shape[-1]`` must divide by ``group_size``;
    ``scales`` has shape ``(*w.shape[:-1], w.shape[-1] // group_size)``. Per group the scale is
    the largest float32 exponent after rounding to bf16 and flushing magnitudes below 2^-126.
    """
    if not isinstance(w, torch.Tensor) or w.dtype not in QUANTIZE_INPUT_DTYPES:
        raise TypeError(f"w must be a float32, bfloat16 or float16 tensor, got {_describe(w)}")
    _check_group_size(group_size)
    if w.dim() == 0:
        raise ValueError("w must have at least one dimension, got a 0-d tensor")
    if w.shape[-1] % group_size != 0:
        raise ValueError(
            f"w's last dimension ({w.shape[-1]}) must be a multiple of group_size={group_size}"
        )
    if not torch.isfinite(w).all():
        raise ValueError("w contains inf or NaN, which MXINT8 cannot encode")

    x = w.to(torch.bfloat16).float().reshape(-1, group_size)
    x = torch.where(x.abs() < FLOAT32_SMALLEST_NORMAL, 0.0, x)
    biased_exponent = (x.view(torch.int32) >> 23) & 0xFF
    scale = biased_exponent.amax(dim=1, keepdim=True)
    step = torch.exp2((scale - SCALE_BIAS).float())  # exact powers of two, 2^-127 when all-zero
    magnitude = torch.round(x.abs() / step * 2**MANTISSA_FRACTION_BITS).clamp(0, MANTISSA_MAX)
    mantissa = torch.where(x < 0, -magnitude, magnitude).to(torch.int8)
    scales_shape = (*w.shape[:-1], w.shape[-1] // group_size)
    return mantissa.reshape(w.shape), scale.to(torch.uint8).reshape(scales_shape)


# --- Module -----------------------------------------------------------------------------------
class MXINT8Linear(nn.Module):
    """``nn.Linear`` with weight and bias stored as MXINT8, like the lab's ``QLinearPacked``.

    Only ~8.25 bits per weight persist. By default, as the lab does, every forward dequantizes
    the whole weight to bf16, casts it to the input's dtype and calls ``F.linear`` (the bf16
    weight lives transiently). With ``fused`` (an attribute, flip it at will) the forward runs
    ``kernels.mxint8_linear.mxint8_linear``, which dequantizes inside the matmul, wherever that
    kernel runs: CUDA, or CPU under TRITON_INTERPRET=1; power-of-two group sizes. It stays off
    by default until the fused kernel has been measured on a GPU.
    """

    def __init__(
        self, linear: nn.Linear, group_size: int = DEFAULT_GROUP_SIZE, fused: bool = False
    ):
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be an nn.Linear, got {type(linear).__name__}")
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.group_size = group_size
        self.fused = fused
        weight_mantissa, weight_scales = quantize(linear.weight.detach(), group_size)
        self.register_buffer("weight_mantissa", weight_mantissa)
        self.register_buffer("weight_scales", weight_scales)
        if linear.bias is None:
            self.bias_mantissa = self.bias_scales = None
        else:
            padded = _pad_to_multiple(linear.bias.detach(), group_size)
            bias_mantissa, bias_scales = quantize(padded, group_size)
            self.register_buffer("bias_mantissa", bias_mantissa)
            self.register_buffer("bias_scales", bias_scales)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from kernels.mxint8_linear import fused_linear_supported, mxint8_linear  # no import cycle

        bias = None
        if self.bias_mantissa is not None:
            bias = dequantize(self.bias_mantissa, self.bias_scales, self.group_size)
            bias = bias[: self.out_features]
        if self.fused and fused_linear_supported(x, self.group_size):
            weight = (self.weight_mantissa, self.weight_scales)
            return mxint8_linear(x, *weight, bias, self.group_size)
        weight = dequantize(self.weight_mantissa, self.weight_scales, self.group_size)
        return F.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))

    @property
    def storage_bytes(self) -> int:
        """Bytes of the persistent MXINT8 buffers (weight and bias, mantissas and scales)."""
        return sum(b.numel() * b.element_size() for b in self.buffers())

    @property
    def bits_per_weight(self) -> float:
        """Storage bits per weight element: 8 + 8 / group_size, bias excluded."""
        weight_bytes = self.weight_mantissa.numel() + self.weight_scales.numel()
        return 8.0 * weight_bytes / self.weight_mantissa.numel()

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mantissa is not None}, group_size={self.group_size}, "
            f"fused={self.fused}"
        )


def _pad_to_multiple(values: torch.Tensor, multiple: int) -> torch.Tensor:
    padding = (-values.numel()) % multiple
    return F.pad(values, (0, padding))
