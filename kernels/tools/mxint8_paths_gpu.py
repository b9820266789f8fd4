"""Time every path and config of the fused MXINT8 linear on the suite's shapes, beside bf16
``F.linear``, dequantize + ``F.linear`` and the configs the committed table held before the GEMV
kernels; check each config's error and the GEMV kernels' weights bit for bit on every (v, e)
pair; profile the fastest batch-1 kernels with Nsight Compute where ``ncu`` is installed.

Every time is CUDA-graph device time (measure.timing.graph_seconds_per_call) over weight copies
rotated through more than 4x L2, as the suite's test_linear and kernels/tools/mxint8_tune.py
measure.
Results go to ``--out`` (JSON, rewritten after each problem, so a run cut short keeps what it
measured). The committed table itself is chosen by kernels/tools/mxint8_tune.py.

Run on a CUDA machine from the repository root:
``PYTHONPATH=$PWD python kernels/tools/mxint8_paths_gpu.py --out paths.json --ncu-dir ncu``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

from kernels.mxint8 import (
    LinearConfig,
    dequantize,
    dequantize_reference,
    mxint8_linear,
    mxint8_linear_reference,
    quantize,
    relative_error,
)
from kernels.mxint8.linear_launch import launch
from kernels.mxint8.tuning import path_candidates
from perfgate.measure.timing import graph_seconds_per_call, l2_cache_bytes

# Nsight Compute profiles one launch of a config in a fresh process of this tool's sibling
CASE_TOOL = Path(__file__).with_name("mxint8_linear_gpu_check.py")

SHAPES = [(4096, 4096), (14336, 4096)]  # (N, K) of the suite's Linear cases
BATCHES = [1, 16, 512]
GROUP = 32
# The committed table before this work (tile kernel; batch 1 and 16 shared the "16x" entry).
BEFORE = {
    (4096, 4096): LinearConfig(16, 64, 256, 4, 4, 3),
    (14336, 4096): LinearConfig(16, 64, 256),
}
START = time.perf_counter()


def log(*parts) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s]", *parts, flush=True)


def graph_us(calls) -> float:
    return 1e6 * graph_seconds_per_call(calls, torch.device("cuda"))


def copies_for(nbytes: int) -> int:
    return max(2, -(-4 * l2_cache_bytes(torch.device("cuda")) // nbytes))


def all_pairs_mismatches(config: LinearConfig) -> dict:
    """Weights through the kernel (x = I gives W^T) that differ from the reference, every
    (v, e) pair, usual scales and all finite ones; tensor cores may flush subnormals."""
    counts = {}
    for low, high in [(7, 252), (0, 254)]:
        mantissa = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat(256, 1)
        rows, groups = torch.arange(256, device="cuda"), torch.arange(8, device="cuda")
        scales = (low + (rows[:, None] + groups[None, :]) % (high - low + 1)).to(torch.uint8)
        identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
        got = mxint8_linear(identity, mantissa, scales, None, GROUP, config=config)
        expected = dequantize_reference(mantissa, scales, GROUP).t()
        differ = (got.view(torch.int16) != expected.view(torch.int16)) & (got != expected)
        subnormal = expected.float().abs() < 2.0**-126
        counts[f"{low}..{high}"] = int((differ & ~subnormal).sum())
    return counts


def resources(config: LinearConfig, m: int, n: int, k: int) -> dict:
    """Registers, spills and shared memory of the config's compiled kernel."""
    mantissa, scales = quantize(torch.randn(n, k, device="cuda") * 0.02, GROUP)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kernel = launch(x, mantissa, scales, None, out, GROUP, config)
    return {"registers": kernel.n_regs, "spills": kernel.n_spills, "shared": kernel.metadata.shared}


def problem(n: int, k: int, m: int, weights: list, bf16_weights: list, passes: int) -> list:
    """Every path of one problem, timed in ``passes`` interleaved passes (median kept)."""
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    expected = mxint8_linear_reference(x, *weights[0], bias, GROUP)
    rows = [{"path": "bf16 F.linear"}, {"path": "dequantize + F.linear"}]
    calls = [[lambda w=w: F.linear(x, w, bias) for w in bf16_weights]]
    calls.append([lambda c=c: F.linear(x, dequantize(*c, GROUP), bias) for c in weights])
    configs = [("before", BEFORE[(n, k)])] if m <= 16 else []
    configs += [("candidate", c) for c in path_candidates(m, n, k)] if m <= 16 else []
    for role, config in configs:
        y = mxint8_linear(x, *weights[0], bias, GROUP, config=config)
        rows.append({"path": config.kernel, "role": role, "config": config.__dict__})
        rows[-1]["relative_error"] = relative_error(y, expected)
        calls.append(
            [lambda c=c, f=config: mxint8_linear(x, *c, bias, GROUP, config=f) for c in weights]
        )
    samples = [[] for _ in rows]
    for _ in range(passes):
        for sample, problem_calls in zip(samples, calls, strict=True):
            sample.append(graph_us(problem_calls))
    for row, sample in zip(rows, samples, strict=True):
        row |= {"n": n, "k": k, "m": m, "us": statistics.median(sample), "samples_us": sample}
    best = min((r for r in rows if "config" in r), key=lambda r: r["us"], default=None)
    fastest = f"{best['us']:.1f} {best['config']}" if best else "-"
    log(f"{n}x{k} M={m}: bf16 {rows[0]['us']:.1f} deq+lin {rows[1]['us']:.1f} best {fastest}")
    return rows


def ncu_profile(config: LinearConfig, m: int, n: int, k: int, path: Path) -> str:
    """Nsight Compute's main sections for one launch of ``config`` (a child process)."""
    sections = [
        "SpeedOfLight",
        "Occupancy",
        "LaunchStats",
        "WarpStateStats",
        "MemoryWorkloadAnalysis",
    ]
    command = ["ncu", *[a for s in sections for a in ("--section", s)], "-k", "regex:mxint8_",
               "--launch-skip", "3", "--launch-count", "1", sys.executable, str(CASE_TOOL),
               "--ncu-case", json.dumps([n, k, m, config.__dict__])]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=150)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"ncu failed: {error!r}"
    path.write_text(done.stdout + done.stderr)
    return done.stdout[-6000:] + done.stderr[-1000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="mxint8_paths.json")
    parser.add_argument("--ncu-dir", help="write Nsight Compute reports here (needs ncu)")
    parser.add_argument("--passes", type=int, default=3, help="interleaved timing passes")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    result |= {"triton": triton.__version__, "rows": [], "bit_exactness": {}, "resources": []}
    log(result)
    for config in [
        LinearConfig(1, 16, 256, 2, 4, 3, kernel="gemv"),
        LinearConfig(1, 32, 256, 1, 4, 1, kernel="gemv"),
        LinearConfig(1, 16, 256, 1, 4, 3, kernel="gemv_stream", programs_per_sm=3),
    ]:
        result["bit_exactness"][str(config)] = all_pairs_mismatches(config)
    log("bit exactness", result["bit_exactness"])
    for n, k in SHAPES:
        weights = [
            quantize(torch.randn(n, k, device="cuda") * 0.02, GROUP)
            for _ in range(copies_for(n * k))
        ]
        bf16_weights = [dequantize(*c, GROUP) for c in weights[: copies_for(2 * n * k)]]
        for m in BATCHES:
            result["rows"] += problem(n, k, m, weights, bf16_weights, args.passes)
            Path(args.out).write_text(json.dumps(result, indent=1))
        del weights, bf16_weights
        torch.cuda.empty_cache()
    best = {}
    for row in result["rows"]:
        key = (row["n"], row["k"], row["m"])
        if "config" in row and (key not in best or row["us"] < best[key]["us"]):
            best[key] = row
    for (n, k, m), row in best.items():
        config = LinearConfig(**row["config"])
        result["resources"].append(
            {"n": n, "k": k, "m": m, "config": row["config"]} | resources(config, m, n, k)
        )
    Path(args.out).write_text(json.dumps(result, indent=1))
    if args.ncu_dir and shutil.which("ncu"):
        Path(args.ncu_dir).mkdir(exist_ok=True)
        for m in BATCHES:
            row = best.get((14336, 4096, m))
            if row:
                name = f"ncu_14336x4096_b{m}_{row['path']}.txt"
                log(
                    ncu_profile(
                        LinearConfig(**row["config"]), m, 14336, 4096, Path(args.ncu_dir) / name
                    )[-3000:]
                )
    elif args.ncu_dir:
        log("ncu is not installed here")
    log("done")


if __name__ == "__main__":
    main()
