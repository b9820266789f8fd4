"""Build the fused linear's warp-specialized kernel (kernels/mxint8/linear_ws.py) for Hopper on
any machine, no GPU needed, and report what its machine code holds.

For each config: shared memory, registers and spills as Triton's ptxas reports them for sm_90a,
and counts of the SASS instructions that matter (HGMMA: tensor cores; USETMAXREG: registers
handed between warp groups; LDS.128 / STS.128: 16-byte shared-memory accesses; LDL / STL:
local memory). tests/test_mxint8_ws.py runs it on the CPU; run it before a GPU call.

``python kernels/tools/mxint8_hopper_build.py ws,8,128,64,2,4,12 [...]`` (kernel, block_m,
block_n, block_k, split_k, num_warps, num_stages), or ``--swept`` for every swept config.
Prints one JSON object a config. Triton's interpreter must be off (TRITON_INTERPRET unset).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

SASS_COUNTED = ("HGMMA", "USETMAXREG", "LDS.128", "STS.128", "LDL", "STL")


def nvidia_tool(name: str) -> Path:
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def build(config, m: int = 512, n: int = 4096, k: int = 4096, group_size: int = 32):
    """The kernel of ``config`` compiled for sm_90a (Triton's CompiledKernel), with no GPU."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.jit import mangle_type

    from kernels.mxint8 import linear_ws

    x_layout, w_layout = linear_ws._shared_layouts(config.block_m, config.block_n, config.block_k)
    x_block, w_block = [config.block_m, config.block_k], [config.block_n, config.block_k]
    descriptors = {
        "x_desc": TensorDescriptor(torch.empty(m, k, dtype=torch.bfloat16), [m, k], [k, 1],
                                   x_block, x_layout),
        "w_desc": TensorDescriptor(torch.empty(n, k, dtype=torch.int8), [n, k], [k, 1],
                                   w_block, w_layout),
    }  # fmt: skip
    constants = dict(
        GROUP_SIZE=group_size, HAS_BIAS=True, SPLIT_K=config.split_k, STAGES=config.num_stages,
        W_STAGES=linear_ws.W_STAGES, WEIGHT_LEFT=config.kernel == "ws",
        DEQUANTIZE_REGISTERS=linear_ws.DEQUANTIZE_REGISTERS, SCALE_CHUNK=8,
    )  # fmt: skip
    pointers = dict(scales_ptr="*u8", bias_ptr="*bf16", out_ptr="*bf16", workspace_ptr="*fp32")
    pointers["counters_ptr"] = "*i32"
    kernel = linear_ws.mxint8_ws_kernel
    signature, constexprs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if kernel.params[i].is_constexpr:
            signature[name] = "constexpr"
            constexprs[(i,)] = constants[name]
        elif name in descriptors:
            signature[name] = mangle_type(descriptors[name])
        else:
            signature[name] = pointers.get(name, "i32")
    options = dict(num_warps=config.num_warps, maxnreg=linear_ws.max_registers(config.num_warps))
    source = GluonASTSource(kernel, signature, constexprs=constexprs)
    return triton_compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def report(config) -> dict:
    """What the sm_90a build of ``config`` holds; ``error`` where it does not build."""
    result = {"config": repr(config)}
    try:
        binary = build(config)
    except Exception as error:  # noqa: BLE001 - a config ptxas rejects is reported, not raised
        result["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:200]}"
        return result
    with tempfile.TemporaryDirectory() as folder:
        ptx, cubin = Path(folder) / "k.ptx", Path(folder) / "k.cubin"
        ptx.write_text(binary.asm["ptx"])
        ptxas = subprocess.run(
            [nvidia_tool("ptxas"), "-arch=sm_90a", "-v", ptx, "-o", Path(folder) / "again.cubin"],
            capture_output=True, text=True, check=True,
        ).stderr  # fmt: skip
        cubin.write_bytes(binary.asm["cubin"])
        sass = subprocess.run(
            [nvidia_tool("cuobjdump"), "-sass", cubin], capture_output=True, text=True, check=True
        ).stdout
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", ptxas)
    result["shared_bytes"] = binary.metadata.shared
    result["registers"] = int(re.search(r"Used (\d+) registers", ptxas).group(1))
    result["spill_bytes"] = int(spills.group(1)) + int(spills.group(2))
    counts = {name: len(re.findall(rf"\b{re.escape(name)}\b", sass)) for name in SASS_COUNTED}
    result["sass"] = counts
    return result


def parse_config(text: str):
    from kernels.mxint8.linear_launch import LinearConfig

    kernel, *numbers = text.split(",")
    bm, bn, bk, split, warps, stages = (int(v) for v in numbers)
    return LinearConfig(bm, bn, bk, split, warps, stages, kernel=kernel)


def swept() -> list:
    from kernels.mxint8.linear_sweep import ws_configs

    configs = [c for bucket in (1, 16, 32, 64, 512) for c in ws_configs(bucket, 4096)]
    return list(dict.fromkeys(c for c in configs if c.split_k <= 2))  # split: one constexpr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fields = "kernel,block_m,block_n,block_k,split,warps,stages"
    parser.add_argument("configs", nargs="*", help=fields)
    parser.add_argument("--swept", action="store_true", help="every swept ws config")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        sys.exit("unset TRITON_INTERPRET: the interpreter cannot build Gluon kernels")
    configs = [parse_config(c) for c in args.configs] + (swept() if args.swept else [])
    for config in configs:
        print(json.dumps(report(config)), flush=True)


if __name__ == "__main__":
    main()
