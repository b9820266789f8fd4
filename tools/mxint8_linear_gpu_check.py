"""GPU check of the fused MXINT8 linear (kernels/mxint8_linear.py): bit-exact dequantization,
relative error on large shapes, and a timing table against bf16 ``F.linear`` and the lab's
dequantize-then-``F.linear``, plus a sweep of the autotuner's candidate configs.

Run on a CUDA machine from the repository root:
``PYTHONPATH=$PWD python tools/mxint8_linear_gpu_check.py --out mxint8_linear_gpu.json``
(under 4 minutes on an H100, autotuning included; one failing case prints and moves on).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import traceback

import torch
import torch.nn.functional as F
import triton
import triton.testing

from kernels import mxint8_linear as fl
from kernels.mxint8 import dequantize, dequantize_reference, quantize

SHAPES = [(4096, 4096), (14336, 4096)]  # (N, K) = (out_features, in_features)
BATCHES = [1, 16, 512, 4096]
GROUPS = [32, 128]
HBM_BYTES_PER_S = 3.0e12  # H100 device-to-device copy, docs/NOTES.md
SWEEP_DEADLINE_S = 200  # skip the optional sweep past this, to stay under 4 minutes
# A large-batch candidate: the bit-exactness check compiles nothing the timings will not use
BIT_EXACT_CONFIG = fl.LinearConfig(128, 128, 64, 1, 8, 4)
START = time.perf_counter()


def log(*parts) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s]", *parts, flush=True)


def guarded(label: str, fn, *args):
    """fn(*args), or None after printing the error: one failing case must not end the run."""
    try:
        return fn(*args)
    except Exception as error:  # noqa: BLE001 - report and continue, by design
        log(f"FAILED {label}: {error!r}")
        traceback.print_exc()
        return None


def relative_error(y: torch.Tensor, reference: torch.Tensor) -> float:
    return ((y.double() - reference.double()).norm() / reference.double().norm()).item()


# --- Correctness --------------------------------------------------------------------------------
def bit_exactness() -> dict:
    """Mismatching bf16 weights (x = I gives W^T) over every (mantissa, scale) pair, group 32."""
    counts = {}
    for name, (low, high) in {"scales_7_252": (7, 252), "scales_0_254": (0, 254)}.items():
        mantissa = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat(256, 1)
        rows, groups = torch.arange(256, device="cuda"), torch.arange(8, device="cuda")
        scales = (low + (rows[:, None] + groups[None, :]) % (high - low + 1)).to(torch.uint8)
        identity = torch.eye(256, dtype=torch.bfloat16, device="cuda")
        zero = torch.zeros(256, dtype=torch.bfloat16, device="cuda")  # a bias, as in the timings
        got = fl.mxint8_linear(identity, mantissa, scales, zero, 32, config=BIT_EXACT_CONFIG)
        expected = dequantize_reference(mantissa, scales, 32).t()
        differ = (got.view(torch.int16) != expected.view(torch.int16)) & ~(
            (got == 0) & (expected == 0)
        )
        subnormal = expected.float().abs() < 2.0**-126
        counts[name] = {
            "mismatches": int(differ.sum()),
            "mismatches_not_subnormal": int((differ & ~subnormal).sum()),
        }
        log(f"bit exactness {name}: {counts[name]}")
    return counts


def weight_copies(n: int, k: int, group: int, copies: int) -> list[tuple]:
    """``copies`` independent MXINT8 weights [n, k] (quantized N(0, 0.02)) with bf16 twins."""
    out = []
    for _ in range(copies):
        w = torch.randn(n, k, device="cuda") * 0.02
        mantissa, scales = quantize(w, group)
        out.append((mantissa, scales, dequantize(mantissa, scales, group)))
    return out


def correctness_row(n: int, k: int, m: int, group: int, weight: tuple, bias) -> dict:
    mantissa, scales, _ = weight
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)  # fresh for every check
    torch.cuda.synchronize()
    begin = time.perf_counter()
    y = fl.mxint8_linear(x, mantissa, scales, bias, group)  # autotunes on first use
    torch.cuda.synchronize()
    seconds = time.perf_counter() - begin
    reference = fl.mxint8_linear_reference(x, mantissa, scales, bias, group)
    row = {"n": n, "k": k, "m": m, "group": group, "first_call_s": seconds}
    row["relative_error"] = relative_error(y, reference)
    row["config"] = str(fl.tuned_config(m, n, k, group))
    row["decomposition"] = decomposition_of(m, n, k, group)
    row["ok"] = row["relative_error"] < 1e-2
    log(
        f"correct {n}x{k} M={m:5d} g{group}: rel err {row['relative_error']:.2e} "
        f"{'ok' if row['ok'] else 'FAIL'} (first call {seconds:.1f}s, {row['decomposition']}, "
        f"{row['config']})"
    )
    return row


def decomposition_of(m: int, n: int, k: int, group: int) -> str:
    for key, choice in fl._decompositions.items():
        if key[:5] == (fl._m_bucket(m), n, k, group, True):
            return choice
    return "fused"


# --- Timing -------------------------------------------------------------------------------------
def rotation(weight_bytes: int) -> int:
    """Copies so that one pass over them is twice the 50 MB L2."""
    return max(2, math.ceil(2 * 50e6 / weight_bytes) + 1)


def time_us(fn) -> float:
    """do_bench median, microseconds (it flushes L2 before each call)."""
    return 1e3 * triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def graph_us(fn) -> float:
    """Median of CUDA graph replays of many calls, microseconds: launch overhead excluded."""
    return 1e3 * triton.testing.do_bench_cudagraph(fn, rep=20, return_mode="median")


def cycling(calls: list):
    """A zero-argument function calling each of ``calls`` in turn: rotates the weight copies."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def timing_row(n, k, m, group, int8_copies, bf16_weights, bias) -> dict:
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    dense = cycling([lambda w=w: F.linear(x, w, bias) for w in bf16_weights])
    lab = cycling(
        [lambda c=c: F.linear(x, dequantize(c[0], c[1], group), bias) for c in int8_copies]
    )
    fused = cycling([lambda c=c: fl.mxint8_linear(x, c[0], c[1], bias, group) for c in int8_copies])
    row = {"n": n, "k": k, "m": m, "group": group}
    for name, fn in [("bf16", dense), ("dequant_linear", lab), ("fused", fused)]:
        row[f"{name}_us"] = guarded(f"time {name} {n}x{k} M={m} g{group}", time_us, fn)
        row[f"{name}_graph_us"] = guarded(f"graph {name} {n}x{k} M={m}", graph_us, fn)
    floor_bytes = n * k * (1 + 1 / group) + 2 * m * k + 2 * m * n
    row["floor_us"] = 1e6 * floor_bytes / HBM_BYTES_PER_S
    row["decomposition"] = decomposition_of(m, n, k, group)
    config = fl.tuned_config(m, n, k, group)
    row["config"] = str(config)
    if row["decomposition"] != "fused" and config is not None:  # the fused kernel it beat
        kernel = cycling(
            [
                lambda c=c: fl.mxint8_linear(x, c[0], c[1], bias, group, config=config)
                for c in int8_copies
            ]
        )
        row["fused_kernel_us"] = guarded(f"fused kernel {n}x{k} M={m}", time_us, kernel)
    return row


def sweep_rows(n, k, m, group, int8_copies, bias) -> list[dict]:
    """Every candidate config of this shape, and dequantize-once, timed on their own."""
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    rows = []
    variants = [(str(c), c) for c in fl.candidate_configs(m, n, k)] + [("dequantize_once", None)]
    for label, config in variants:
        if config is None:
            calls = [
                lambda c=c: fl._dequantize_then_matmul(x, c[0], c[1], bias, group)
                for c in int8_copies
            ]
        else:
            calls = [
                lambda c=c, cfg=config: fl.mxint8_linear(x, c[0], c[1], bias, group, config=cfg)
                for c in int8_copies
            ]
        us = guarded(f"sweep {label} {n}x{k} M={m} g{group}", time_us, cycling(calls))
        rows.append({"n": n, "k": k, "m": m, "group": group, "variant": label, "us": us})
    best = min((r for r in rows if r["us"]), key=lambda r: r["us"], default=None)
    if best:
        log(f"sweep {n}x{k} M={m} g{group}: best {best['variant']} {best['us']:.1f} us")
    return rows


def fmt(value, width: int, decimals: int = 1, suffix: str = "") -> str:
    text = "-" if value is None else f"{value:.{decimals}f}{suffix}"
    return text.rjust(width)


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'N x K':>11} {'g':>4} {'M':>5} | {'bf16':>7} {'deq+lin':>8} {'fused':>7} | "
        f"{'x bf16':>7} {'x deq':>7} {'floor%':>6} | {'fused graph':>11} {'bf16 graph':>10} | "
        "path, config"
    )
    print("\nTimes in us: do_bench medians (L2 flushed, weights rotated); graph: CUDA graph")
    print(header)
    print("-" * len(header))
    for r in rows:
        fused, dense, lab = r.get("fused_us"), r.get("bf16_us"), r.get("dequant_linear_us")
        speedup = dense / fused if fused and dense else None
        versus_lab = lab / fused if fused and lab else None
        floor = 100 * r["floor_us"] / fused if fused else None
        print(
            f"{r['n']:>5}x{r['k']:<5} {r['group']:>4} {r['m']:>5} | {fmt(dense, 7)} "
            f"{fmt(lab, 8)} {fmt(fused, 7)} | {fmt(speedup, 7, 2, 'x')} "
            f"{fmt(versus_lab, 7, 2, 'x')} {fmt(floor, 6, 0, '%')} | "
            f"{fmt(r.get('fused_graph_us'), 11)} {fmt(r.get('bf16_graph_us'), 10)} | "
            f"{r['decomposition']}, {r['config']}",
            flush=True,
        )


# --- Main -----------------------------------------------------------------------------------------
def check_shape(n: int, k: int, group: int, result: dict, sweep: bool) -> None:
    """Correctness, timing and (if asked and in time) a config sweep for one weight shape."""
    copies = guarded(f"weights {n}x{k}", weight_copies, n, k, group, rotation(n * k))
    if copies is None:
        return
    bf16_weights = [c[2] for c in copies[: rotation(2 * n * k)]]
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    for m in BATCHES:
        label = f"{n}x{k} M={m} g{group}"
        row = guarded(f"correctness {label}", correctness_row, n, k, m, group, copies[0], bias)
        result["correctness"].append(row or {"n": n, "k": k, "m": m, "group": group})
        row = guarded(f"timing {label}", timing_row, n, k, m, group, copies, bf16_weights, bias)
        if row:
            result["timing"].append(row)
            log(
                f"time {label}: bf16 {fmt(row['bf16_us'], 0)} us, dequant+linear "
                f"{fmt(row['dequant_linear_us'], 0)} us, fused {fmt(row['fused_us'], 0)} us "
                f"(graph {fmt(row['fused_graph_us'], 0)}), floor {row['floor_us']:.1f} us"
            )
        in_time = time.perf_counter() - START < SWEEP_DEADLINE_S
        if sweep and in_time and m in (1, 16, 512) and group == 32:
            result["sweep"] += (
                guarded(f"sweep {label}", sweep_rows, n, k, m, group, copies, bias) or []
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="mxint8_linear_gpu.json", help="JSON results path")
    parser.add_argument("--no-sweep", action="store_true", help="skip the config sweep")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference is float32, not tf32
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    result |= {"triton": triton.__version__, "correctness": [], "timing": [], "sweep": []}
    log(result["device"], result["torch"], result["triton"])
    result["bit_exactness"] = guarded("bit exactness", bit_exactness)
    for (n, k), group in itertools.product(SHAPES, GROUPS):
        check_shape(n, k, group, result, sweep=not args.no_sweep)
        torch.cuda.empty_cache()
    print_table(result["timing"])
    failures = [r for r in result["correctness"] if not r.get("ok")]
    log(f"correctness: {len(result['correctness']) - len(failures)} ok, {len(failures)} failed")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
