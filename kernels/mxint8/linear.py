"""``mxint8_linear``: ``x @ W^T + bias`` with W stored as MXINT8 and dequantized inside the matmul.

The public entry point of the fused path: checks its inputs, flattens x, picks a config
(tuning.py) or takes the caller's, launches (linear_launch.py) and restores x's shape. With an
input that requires grad it runs under a small autograd function whose backward is
``grad @ W_dequantized`` (and the bias's sum), so gradients are never silently dropped.
"""

from __future__ import annotations

import torch

from kernels.mxint8.dequantize_kernel import dequantize
from kernels.mxint8.format import (
    ACTIVATION_DTYPES,
    DEFAULT_GROUP_SIZE,
    check_linear_inputs,
    is_power_of_two,
    triton_available_for,
)
from kernels.mxint8.linear_launch import (
    INTERPRETER_CONFIG,
    LinearConfig,
    dequantize_then_matmul,
    launch,
)
from kernels.mxint8.reference import mxint8_linear_reference
from kernels.mxint8.tuning import choose_path, run_tuned


def fused_linear_supported(x: torch.Tensor, group_size: int) -> bool:
    """True when ``mxint8_linear`` would run its Triton kernel for ``x`` and ``group_size``."""
    return (
        isinstance(x, torch.Tensor)
        and x.dtype in ACTIVATION_DTYPES
        and triton_available_for(x.device)
        and isinstance(group_size, int)
        and not isinstance(group_size, bool)
        and is_power_of_two(group_size)
    )


def _check_kernel_group_size(group_size: int) -> None:
    if not is_power_of_two(group_size):
        raise ValueError(
            f"group_size={group_size} is not a power of two, which the fused kernel needs; "
            "dequantize-then-linear (MXINT8Linear(fused=False)) takes any group size"
        )


def _forward(x, mantissa, scales, bias, group_size: int, config: LinearConfig | None):
    """The fused forward on checked inputs, without autograd."""
    n, k = mantissa.shape
    if not triton_available_for(x.device) or x.numel() == 0 or n == 0:
        return mxint8_linear_reference(x, mantissa, scales, bias, group_size).to(x.dtype)
    x2d = x.reshape(-1, k)
    if x2d.dtype == torch.float32:
        x2d = x2d.to(torch.bfloat16)
    if x2d.stride(1) != 1:
        x2d = x2d.contiguous()
    mantissa = mantissa.contiguous()
    if mantissa.data_ptr() % 4:  # the kernel reads it as int32 words on GPUs
        mantissa = mantissa.clone()
    operands = (x2d, mantissa, scales.contiguous(), bias)
    if config is None and choose_path(*operands, group_size) == "dequantize_once":
        out = dequantize_then_matmul(*operands, group_size).to(x.dtype)
    else:
        out = torch.empty((x2d.shape[0], n), dtype=x.dtype, device=x.device)
        if config is not None:
            launch(*operands, out, group_size, config)
        else:
            run_tuned(*operands, out, group_size)
    return out.reshape(*x.shape[:-1], n)


class _FusedLinearFunction(torch.autograd.Function):
    """The fused forward with the exact backward of ``x @ W^T + bias`` for x and bias (the
    MXINT8 codes are integers and take no gradient)."""

    @staticmethod
    def forward(ctx, x, mantissa, scales, bias, group_size, config):
        ctx.save_for_backward(mantissa, scales)
        ctx.group_size = group_size
        ctx.bias_dtype = None if bias is None else bias.dtype
        return _forward(x, mantissa, scales, bias, group_size, config)

    @staticmethod
    def backward(ctx, grad):
        mantissa, scales = ctx.saved_tensors
        grad_x = grad_bias = None
        if ctx.needs_input_grad[0]:
            weight = dequantize(mantissa, scales, ctx.group_size).to(grad.dtype)
            grad_x = grad @ weight
        if ctx.needs_input_grad[3]:
            grad_bias = grad.reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype)
        return grad_x, None, None, grad_bias, None, None


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

    On CUDA the block sizes and K split come from the committed table for this GPU and the
    (batch bucket, N, K, group size) (tuning.py; a default config where the table has none), or
    are autotuned per process with ``MXINT8_AUTOTUNE=1``, unless ``config`` fixes them; from
    DEQUANTIZE_ONCE_MIN_BATCH rows a shape takes dequantize-then-cuBLAS instead. Autotuning
    times kernels on a shape's first call, so make that call outside CUDA graph capture. CPU
    tensors run the kernel through Triton's interpreter (one fixed config) when
    ``TRITON_INTERPRET=1``, else ``mxint8_linear_reference``. Gradients flow to ``x`` and
    ``bias`` when they require them.
    """
    check_linear_inputs(x, mantissa, scales, bias, group_size)
    _check_kernel_group_size(group_size)
    if config is None and triton_available_for(x.device) and x.device.type == "cpu":
        config = INTERPRETER_CONFIG  # the interpreter never autotunes
    needs_grad = x.requires_grad or (bias is not None and bias.requires_grad)
    if needs_grad and torch.is_grad_enabled():
        return _FusedLinearFunction.apply(x, mantissa, scales, bias, group_size, config)
    return _forward(x, mantissa, scales, bias, group_size, config)
