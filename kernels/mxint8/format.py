"""MXINT8 format facts as named constants, and the input checks every entry point shares.

The bottom of the package: it imports nothing from the rest of ``kernels.mxint8``.
``docs/MXINT8.md`` is the specification.
"""

from __future__ import annotations

import os

import torch

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
BF16_MAX = torch.finfo(torch.bfloat16).max  # (2 - 2^-7) * 2^127; the quantizer saturates to it

QUANTIZE_INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32)  # what the fused kernel reads
BIAS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --- Small shared helpers ---------------------------------------------------------------------
def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def describe(value: object) -> str:
    """'a torch.int8 tensor' or the type's name: for error messages."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor"
    return type(value).__name__


def interpreting() -> bool:
    """True under Triton's interpreter (TRITON_INTERPRET=1, read when kernels are decorated)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def triton_available_for(device: torch.device) -> bool:
    """True when the Triton kernels can run on ``device``: CUDA, or CPU under TRITON_INTERPRET=1."""
    if device.type == "cuda":
        return True
    return device.type == "cpu" and interpreting()


# --- Input checks (at the wrappers, never in the kernels) -------------------------------------
def check_group_size(group_size: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError(f"group_size must be an int, got {type(group_size).__name__}")
    if group_size <= 0:
        raise ValueError(f"group_size must be positive, got {group_size}")


def check_codes(mantissa: torch.Tensor, scales: torch.Tensor) -> None:
    """int8 mantissas and uint8 scales, or a TypeError naming the one that is not."""
    if not isinstance(mantissa, torch.Tensor) or mantissa.dtype != torch.int8:
        raise TypeError(f"mantissa must be an int8 tensor, got {describe(mantissa)}")
    if not isinstance(scales, torch.Tensor) or scales.dtype != torch.uint8:
        raise TypeError(f"scales must be a uint8 tensor, got {describe(scales)}")


def check_dequantize_inputs(mantissa: torch.Tensor, scales: torch.Tensor, group_size: int) -> None:
    check_codes(mantissa, scales)
    check_group_size(group_size)
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
    check_one_device(mantissa=mantissa, scales=scales)


def check_linear_inputs(x, mantissa, scales, bias, group_size) -> None:
    """The operands of ``x @ W^T + bias`` with W [N, K] as MXINT8, grouped along K."""
    if not isinstance(x, torch.Tensor) or x.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"x must be a bfloat16, float16 or float32 tensor, got {describe(x)}")
    check_codes(mantissa, scales)
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.dtype not in BIAS_DTYPES):
        raise TypeError(f"bias must be None or a floating-point tensor, got {describe(bias)}")
    check_group_size(group_size)
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
    check_one_device(x=x, mantissa=mantissa, scales=scales, bias=bias)


def check_one_device(**tensors: torch.Tensor | None) -> None:
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"{', '.join(devices)} must be on one device, got {where}")
