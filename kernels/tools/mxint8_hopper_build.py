"""Build the fused linear's warp-specialized Gluon kernel (kernels/mxint8/linear_mma_ws.py) for
Hopper on any machine, no GPU needed, and report what its machine code holds.

For each config: shared memory, registers and spills as ptxas reports them for sm_90a, whether
ptxas serialized the asynchronous wgmma instructions (its "Potential Performance Loss" notes:
then no dequantization overlaps the tensor cores), and counts of the SASS instructions that
matter (HGMMA: tensor cores; the smallest wgmma wait depth in the code; LDL / STL: local
memory). tests/test_mxint8_mma_ws.py runs it on the CPU; run it before a GPU call.

``python kernels/tools/mxint8_hopper_build.py 256,4 128,6`` (block_m, num_stages), or ``--swept``
for every swept config. Prints one JSON object a config. Triton's interpreter must be off.
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


def nvidia_tool(name: str) -> Path:
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def build(config, m: int = 512, n: int = 4096, k: int = 4096, group_size: int = 32):
    """The kernel of ``config`` compiled for sm_90a (Triton's CompiledKernel), with no GPU: the
    arguments specialized as a launch on 16-byte aligned tensors would be."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from triton.runtime.jit import mangle_type

    from kernels.mxint8 import linear_mma_ws as ws

    x_layout, w_layout = ws.shared_layouts(config.block_m)
    x = torch.empty(m, k, dtype=torch.bfloat16)
    mantissa = torch.empty(n, k, dtype=torch.int8)
    descriptors = {
        "x_desc": TensorDescriptor(x, [m, k], [k, 1], [config.block_m, ws.BLOCK_K], x_layout),
        "w_desc": TensorDescriptor(mantissa, [n, k], [k, 1], [ws.BLOCK_N, ws.BLOCK_K], w_layout),
    }
    constants = dict(
        GROUP_SIZE=group_size,
        HAS_BIAS=True,
        STAGES=config.num_stages,
        CONSUMER_REGISTERS=ws.CONSUMER_REGISTERS,
    )
    pointers = dict(scales_ptr="*u8", bias_ptr="*bf16", out_ptr="*bf16")
    kernel = ws.mxint8_mma_ws_kernel
    signature, constexprs, attrs = {}, {}, {}
    for i, name in enumerate(kernel.arg_names):
        if kernel.params[i].is_constexpr:
            signature[name] = "constexpr"
            constexprs[(i,)] = constants[name]
        elif name in descriptors:
            signature[name] = mangle_type(descriptors[name])
        else:
            signature[name] = pointers.get(name, "i32")
            attrs[(i,)] = [["tt.divisibility", 16]]  # every pointer and size: multiples of 16
    source = GluonASTSource(kernel, signature, constexprs=constexprs, attrs=attrs)
    return triton_compile(source, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def report(config) -> dict:
    """What the sm_90a build of ``config`` holds; ``error`` where it does not build."""
    result = {"config": repr(config)}
    try:
        binary = build(config)
    except Exception as error:  # noqa: BLE001 - a config that does not build is reported
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
    notes = [line.split(") ", 1)[-1] for line in ptxas.splitlines() if "serial" in line]
    result["serialized"] = notes
    waits = [int(d, 16) for d in re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([0-9a-f]+)", sass)]
    result["sass"] = {
        "HGMMA": len(re.findall(r"\bHGMMA\b", sass)),
        "wgmma waits": len(waits),
        "wgmma waits for none in flight": waits.count(0),
        "LDL": len(re.findall(r"\bLDL\b", sass)),
        "STL": len(re.findall(r"\bSTL\b", sass)),
    }
    return result


def parse_config(text: str):
    from kernels.mxint8.linear_launch import LinearConfig

    block_m, stages = (int(v) for v in text.split(","))
    return LinearConfig(block_m, 128, 64, 1, 4, stages, kernel="mma_ws")


def swept() -> list:
    from kernels.mxint8.linear_sweep import sweep_configs

    return [c for c in sweep_configs(512, 4096) if c.kernel == "mma_ws"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="block_m,num_stages")
    parser.add_argument("--swept", action="store_true", help="every swept mma_ws config")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        sys.exit("unset TRITON_INTERPRET: the interpreter cannot build Gluon kernels")
    configs = [parse_config(c) for c in args.configs] + (swept() if args.swept else [])
    for config in configs:
        print(json.dumps(report(config)), flush=True)


if __name__ == "__main__":
    main()
