"""MXINT8 weights: the format, a quantizer, a dequantizer, a fused linear and a Linear layer.

The dequantizer mirrors the CuTe kernel of mase-cuda (``src/csrc/mxint/dequantize.cuh``) bit for
bit, special scales included; docs/MXINT8.md is the specification. Modules, each importing only
from the ones above it:

- ``format``: format constants, small helpers and the input checks;
- ``reference``: the plain-PyTorch references and ``relative_error``;
- ``quantizer``: FP32/BF16/FP16 -> MXINT8;
- ``dequantize_kernel``: the Triton dequantization kernel and its launcher;
- ``linear_tile``, ``linear_words``, ``linear_kernel``: the fused linear's tile kernel (tensor
  cores); ``linear_gemv``, ``linear_gemv_stream``: its batch-1 GEMV kernels (CUDA cores);
  ``linear_mma``: its mixed-input GEMM (the weight dequantized in wgmma's register operand);
- ``linear_launch``: one launch of it with a given config; ``linear_sweep``: the configs swept
  beyond the autotuner's; ``tuning``: choosing the config;
- ``linear``: ``mxint8_linear``, the fused path's entry point (with autograd);
- ``module``: ``MXINT8Linear``.
"""

from kernels.mxint8.dequantize_kernel import dequantize
from kernels.mxint8.format import DEFAULT_GROUP_SIZE, triton_available_for
from kernels.mxint8.linear import fused_linear_supported, mxint8_linear
from kernels.mxint8.linear_launch import LinearConfig
from kernels.mxint8.module import MXINT8Linear
from kernels.mxint8.quantizer import quantize
from kernels.mxint8.reference import dequantize_reference, mxint8_linear_reference, relative_error
from kernels.mxint8.tuning import candidate_configs, tuned_config

__all__ = [
    "DEFAULT_GROUP_SIZE",
    "LinearConfig",
    "MXINT8Linear",
    "candidate_configs",
    "dequantize",
    "dequantize_reference",
    "fused_linear_supported",
    "mxint8_linear",
    "mxint8_linear_reference",
    "quantize",
    "relative_error",
    "triton_available_for",
    "tuned_config",
]
