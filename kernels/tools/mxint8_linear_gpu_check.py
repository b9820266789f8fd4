"""GPU check of the fused MXINT8 linear (kernels/mxint8/): correctness, then the issue's table,
a sweep of the autotuner's candidates, and what limits the kernel.

Every time is CUDA-graph device time (measure.timing.graph_seconds_per_call) over weight copies
rotated through more than 4x L2. Columns: bf16 ``F.linear``, dequantize + ``F.linear`` (the
lab's layer), fused (``mxint8_linear``: tuned config, or dequantize-once where it measured
faster), the floor (the 8.25-bit weight read once at the same-size copy bandwidth, measured
here), fused/floor and fused/bf16. The limits section reads the tuned kernel's registers, shared
memory and grid (occupancy, waves), its achieved weight bandwidth, and, with ``--ncu``, Nsight
Compute's DRAM throughput, achieved occupancy and issue-slot use for one launch.

Run on a CUDA machine from the repository root:
``PYTHONPATH=$PWD python kernels/tools/mxint8_linear_gpu_check.py --out mxint8_linear_gpu.json``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import triton

from kernels.mxint8 import (
    LinearConfig,
    candidate_configs,
    dequantize,
    dequantize_reference,
    mxint8_linear,
    mxint8_linear_reference,
    quantize,
    relative_error,
    tuned_config,
)
from kernels.mxint8.linear_launch import launch, launch_plan
from kernels.mxint8.tuning import chosen_path
from perfgate.measure.timing import copy_bandwidth_gbps, graph_seconds_per_call, l2_cache_bytes

SHAPES = [(4096, 4096), (14336, 4096)]  # (N, K) = (out_features, in_features)
BATCHES = [1, 16, 64, 128, 256, 512]  # 64-256: where the fused kernel stops winning
GROUP = 32
OPTIONAL_DEADLINE_S = 170  # past this, skip the sweep and ncu: the table matters most
START = time.perf_counter()


def log(*parts) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s]", *parts, flush=True)


def copies_for(nbytes: int) -> int:
    return max(2, -(-4 * l2_cache_bytes(torch.device("cuda")) // nbytes))


def graph_us(calls) -> float:
    return 1e6 * graph_seconds_per_call(calls, torch.device("cuda"))


# --- Correctness ----------------------------------------------------------------------------------
def bit_exactness() -> dict:
    """Mismatching weights through the whole kernel (x = I gives W^T), every (v, e) pair."""
    counts = {}
    for low, high in [(7, 252), (0, 254)]:
        mantissa = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat(256, 1)
        rows, groups = torch.arange(256, device="cuda"), torch.arange(8, device="cuda")
        scales = (low + (rows[:, None] + groups[None, :]) % (high - low + 1)).to(torch.uint8)
        identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
        zero = torch.zeros(256, dtype=torch.bfloat16, device="cuda")  # a bias, as in the timings
        for config in [None, *candidate_configs(16, 256, 256)[:4]]:
            got = mxint8_linear(identity, mantissa, scales, zero, GROUP, config=config)
            expected = dequantize_reference(mantissa, scales, GROUP).t()
            differ = (got.view(torch.int16) != expected.view(torch.int16)) & (got != expected)
            subnormal = expected.float().abs() < 2.0**-126  # tensor cores may flush these
            counts[f"scales {low}..{high}, {config}"] = int((differ & ~subnormal).sum())
    bad = {k: v for k, v in counts.items() if v}
    log(f"bit exactness: {len(counts)} runs, mismatches outside subnormals: {bad or 'none'}")
    return counts


def gradient_error() -> float:
    mantissa, scales = quantize(torch.randn(4096, 4096, device="cuda") * 0.02, GROUP)
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    mxint8_linear(x, mantissa, scales, None, GROUP).backward(grad)
    expected = grad.float() @ dequantize_reference(mantissa, scales, GROUP).float()
    error = relative_error(x.grad, expected)
    log(f"input gradient vs grad @ W_dequantized: relative error {error:.2e}")
    return error


# --- The table ------------------------------------------------------------------------------------
def weight_copies(n: int, k: int) -> list[tuple]:
    out = []
    for _ in range(copies_for(n * k)):
        mantissa, scales = quantize(torch.randn(n, k, device="cuda") * 0.02, GROUP)
        out.append((mantissa, scales))
    return out


def table_row(n: int, k: int, m: int, weights: list[tuple], bf16_weights: list) -> dict:
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    y = mxint8_linear(x, *weights[0], bias, GROUP)  # tunes (and picks a path) on first use
    error = relative_error(y, mxint8_linear_reference(x, *weights[0], bias, GROUP))
    row = {"n": n, "k": k, "m": m, "relative_error": error}
    row["bf16_us"] = graph_us([lambda w=w: F.linear(x, w, bias) for w in bf16_weights])
    row["dequant_linear_us"] = graph_us(
        [lambda c=c: F.linear(x, dequantize(*c, GROUP), bias) for c in weights]
    )
    row["fused_us"] = graph_us([lambda c=c: mxint8_linear(x, *c, bias, GROUP) for c in weights])
    config = tuned_config(m, n, k, GROUP, True)
    row["fused_kernel_us"] = graph_us(  # the tuned kernel alone, where dequantize-once won
        [lambda c=c: mxint8_linear(x, *c, bias, GROUP, config=config) for c in weights]
    )
    weight_bytes = int(n * k * (1 + 1 / GROUP))
    row["copy_gbps"] = copy_bandwidth_gbps(weight_bytes, torch.device("cuda"))
    row["floor_us"] = 1e6 * weight_bytes / (row["copy_gbps"] * 1e9)
    row["fused_weight_tbps"] = weight_bytes / row["fused_us"] / 1e6
    row["config"] = str(tuned_config(m, n, k, GROUP, True))
    row["path"] = chosen_path(m, n, k, GROUP, True, x.device) or "fused"
    log(
        f"{n}x{k} M={m}: err {error:.1e}, bf16 {row['bf16_us']:.1f}, deq+lin "
        f"{row['dequant_linear_us']:.1f}, fused {row['fused_us']:.1f} ({row['path']}), floor "
        f"{row['floor_us']:.1f} us; {row['config']}"
    )
    return row


def sweep(n: int, k: int, m: int, weights: list[tuple]) -> list[dict]:
    """Every candidate config of this problem, graph-timed on its own."""
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    rows = []
    for config in candidate_configs(m, n, k):
        calls = [
            lambda c=c, cfg=config: mxint8_linear(x, *c, bias, GROUP, config=cfg) for c in weights
        ]
        y = mxint8_linear(x, *weights[0], bias, GROUP, config=config)
        error = relative_error(y, mxint8_linear_reference(x, *weights[0], bias, GROUP))
        row = {"n": n, "k": k, "m": m, "config": str(config), "relative_error": error}
        rows.append(row | {"us": graph_us(calls)})
    best = min(rows, key=lambda r: r["us"])
    log(f"sweep {n}x{k} M={m}: best {best['us']:.1f} us {best['config']}")
    return rows


def print_table(rows: list[dict]) -> None:
    print("\n| N x K, batch | bf16 F.linear | dequantize + F.linear | fused | fused kernel | "
          "floor | fused / floor | fused / bf16 | weight TB/s | path, config |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['n']}x{r['k']}, {r['m']} | {r['bf16_us']:.1f} us | "
            f"{r['dequant_linear_us']:.1f} | {r['fused_us']:.1f} | {r['fused_kernel_us']:.1f} | "
            f"{r['floor_us']:.1f} | "
            f"{100 * r['floor_us'] / r['fused_us']:.0f} % | {r['fused_us'] / r['bf16_us']:.2f}x | "
            f"{r['fused_weight_tbps']:.2f} | {r['path']}, {r['config']} |",
            flush=True,
        )


# --- What limits it -------------------------------------------------------------------------------
def resources(n: int, k: int, m: int) -> dict:
    """Registers, shared memory, grid and theoretical occupancy of the tuned config's kernel."""
    config = tuned_config(m, n, k, GROUP, True)
    mantissa, scales = quantize(torch.randn(n, k, device="cuda") * 0.02, GROUP)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    grid, _ = launch_plan(config, m, n, k, False)
    kernel = launch(x, mantissa, scales, bias, out, GROUP, config)  # whichever kernel it names
    props = torch.cuda.get_device_properties(0)
    regs, shared, warps = kernel.n_regs, kernel.metadata.shared, config.num_warps
    by_regs = 65536 // max(regs * 32 * warps, 1)
    by_shared = (228 * 1024) // max(shared + 1024, 1)
    ctas = max(0, min(by_regs, by_shared, 64 // warps, 32))
    programs = grid[0] * grid[1]
    info = {
        "n": n, "k": k, "m": m, "config": str(config), "registers": regs,
        "spills": kernel.n_spills, "shared_bytes": shared, "ctas_per_sm": ctas,
        "warps_per_sm": ctas * warps, "occupancy": ctas * warps / 64, "programs": programs,
        "waves": programs / max(ctas * props.multi_processor_count, 1),
    }  # fmt: skip
    log(f"limits {n}x{k} M={m}: {info}")
    return info


def ncu_readout(n: int, k: int, m: int) -> str:
    """Nsight Compute on one launch of the tuned kernel (a child process of this script)."""
    config = tuned_config(m, n, k, GROUP, True)
    case = json.dumps([n, k, m, config.__dict__])
    metrics = ",".join([
        "gpu__time_duration.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum",
    ])  # fmt: skip
    command = ["ncu", "--metrics", metrics, "--kernel-name", "regex:mxint8_",
               "--launch-skip", "3", "--launch-count", "1", sys.executable, __file__,
               "--ncu-case", case]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"ncu failed: {error!r}"
    names = metrics.split(",")
    lines = [line for line in done.stdout.splitlines() if any(m in line for m in names)]
    text = "\n".join(lines) or done.stdout[-2000:] + done.stderr[-2000:]
    log(f"ncu {n}x{k} M={m}:\n{text}")
    return text


def ncu_case(spec: str) -> None:
    n, k, m, fields = json.loads(spec)
    mantissa, scales = quantize(torch.randn(n, k, device="cuda") * 0.02, GROUP)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    for _ in range(5):  # ncu skips 3 launches
        mxint8_linear(x, mantissa, scales, bias, GROUP, config=LinearConfig(**fields))
    torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="mxint8_linear_gpu.json", help="JSON results path")
    parser.add_argument("--no-sweep", action="store_true", help="skip the config sweep")
    parser.add_argument("--ncu", action="store_true", help="add Nsight Compute readouts")
    parser.add_argument("--ncu-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_case:
        return ncu_case(args.ncu_case)
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference is float32, not tf32
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    result |= {"triton": triton.__version__, "table": [], "sweep": [], "limits": [], "ncu": {}}
    log(result["device"], result["torch"], result["triton"])
    result["bit_exactness"] = bit_exactness()
    result["gradient_relative_error"] = gradient_error()
    for n, k in SHAPES:
        weights = weight_copies(n, k)
        bf16_weights = [dequantize(*c, GROUP) for c in weights[: copies_for(2 * n * k)]]
        for m in BATCHES:
            result["table"].append(table_row(n, k, m, weights, bf16_weights))
            in_time = time.perf_counter() - START < OPTIONAL_DEADLINE_S
            if not args.no_sweep and m <= 16 and in_time:
                result["sweep"] += sweep(n, k, m, weights)
            if m <= 16:
                result["limits"].append(resources(n, k, m))
            if args.ncu and m == 1 and in_time:
                result["ncu"][f"{n}x{k} M={m}"] = ncu_readout(n, k, m)
        del weights, bf16_weights
        torch.cuda.empty_cache()
    print_table(result["table"])
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
