"""Time every candidate of the MXINT8 dequantization kernel and of the fused linear in one
process: the dequantization kernels against a same-size copy at 2^25 and 2^28 elements, and for
4096x4096 and 14336x4096 weights at batch 1, 16 and 512 bf16 ``F.linear``, dequantize +
``F.linear``, every fused candidate and the floor. Checks every candidate first: the
dequantization kernels bit for bit on all 65,536 (mantissa, scale) pairs, the linear paths'
relative error against the float32 reference.

Every time is device time: a CUDA graph of calls over inputs rotated past 4x L2 (weights for the
linear, mantissas and outputs for the dequantization), the median of 20 replays read with CUDA
events, the median of ``--passes`` interleaved passes. The floor is the MXINT8 weight (8.25 bits
a value) read once at the copy bandwidth measured in the same process (the largest copy).

``--confirm`` times only what the committed tables choose (the dequantization config of this
GPU, the linear table's entries), beside bf16, dequantize + ``F.linear`` and the copy, and
profiles each chosen kernel with Nsight Compute where ``ncu`` is installed. ``--dry`` runs the
whole sweep on the CPU under Triton's interpreter (TRITON_INTERPRET=1) at toy sizes with a wall
clock, to check the script end to end. Writes ``sweep.json`` and ``summary.md`` into ``--out``.

On a CUDA machine, from the repository root:
``PYTHONPATH=$PWD python kernels/tools/mxint8_sweep.py --out OUT [--confirm] [--jobs 12]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from kernels.mxint8 import (
    LinearConfig,
    dequantize,
    dequantize_reference,
    mxint8_linear,
    mxint8_linear_reference,
    quantize,
    relative_error,
)
from kernels.mxint8.dequantize_kernel import (
    launch_dequantize,
    launch_dequantize_words,
    words_config,
)
from kernels.mxint8.tuning import choose_config, chosen_path, path_candidates
from perfgate.measure.timing import graph_seconds_per_call

GROUP = 32
SHAPES = [(4096, 4096), (14336, 4096)]  # (N, K) of the suite's Linear cases
BATCHES = [1, 16, 512]
DEQUANTIZE_SIZES = [2**25, 2**28]
# dequantization kernels: (kernel, elements per program, warps)
DEQUANTIZE_CANDIDATES = [("six_steps", 2048, 4), ("six_steps", 4096, 8)] + [
    ("words", block, warps)
    for block, warps in [
        (2048, 4),
        (4096, 4),
        (4096, 8),
        (8192, 4),
        (8192, 8),
        (16384, 8),
        (16384, 16),
        (32768, 16),
    ]
]
START = time.perf_counter()


def log(*parts) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s]", *parts, flush=True)


# --- Candidates ---------------------------------------------------------------------------------
def fused_candidates(m: int, n: int, k: int, dry: bool) -> list[LinearConfig]:
    """Every config the table may hold (``path_candidates``); at toy sizes a few of each kind."""
    if not dry:
        return path_candidates(m, n, k)
    if m == 1:
        return [LinearConfig(1, 16, 64, 1, 4, 1, kernel="gemv"), LinearConfig(16, 64, 64)]
    mma = [LinearConfig(16, 64, 64, 2, 4, 3, kernel="mma"), LinearConfig(64, 64, 64, kernel="mma")]
    mma.append(LinearConfig(64, 64, 64, kernel="mma_plain"))
    return [LinearConfig(16, 64, 64, 2, 4, 3), LinearConfig(64, 64, 64, 1, 4, 3)] + mma


# --- Timing -------------------------------------------------------------------------------------
def device_us(calls, dry: bool) -> float:
    """Device microseconds per call of ``calls``: a CUDA graph of them, median of 20 replays
    (``perfgate.measure.timing.graph_seconds_per_call``, as the suite times them)."""
    if dry:
        begin = time.perf_counter()
        for call in calls:
            call()
        return 1e6 * (time.perf_counter() - begin) / len(calls)
    return 1e6 * graph_seconds_per_call(calls, torch.device("cuda"))


def l2_bytes(dry: bool) -> int:
    if dry:
        return 2**16
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    return getattr(properties, "L2_cache_size", 50 * 2**20)


def rotations(nbytes: int, dry: bool) -> int:
    return max(2, math.ceil(4 * l2_bytes(dry) / nbytes))


def timed(named_calls: dict, passes: int, dry: bool) -> dict:
    """name -> median over ``passes`` interleaved passes of ``device_us``; a call that fails is
    recorded as its error."""
    samples: dict = {name: [] for name in named_calls}
    for _ in range(passes):
        for name, calls in named_calls.items():
            if isinstance(samples[name], str):
                continue
            try:
                samples[name].append(device_us(calls, dry))
            except Exception as error:  # a config that does not compile or launch
                samples[name] = f"{type(error).__name__}: {str(error)[:300]}"
    return {
        name: (value if isinstance(value, str) else statistics.median(value))
        for name, value in samples.items()
    }


# --- Dequantization -----------------------------------------------------------------------------
def bits_mismatches(got: torch.Tensor, expected: torch.Tensor) -> int:
    both_nan = torch.isnan(got.float()) & torch.isnan(expected.float())
    differ = got.view(torch.int16) != expected.view(torch.int16)
    return int((differ & ~both_nan).sum())


def dequantize_launcher(kernel: str, block: int, warps: int):
    if kernel == "words":
        return lambda m, s, o, g: launch_dequantize_words(m, s, o, g, block, warps)
    return lambda m, s, o, g: launch_dequantize(m, s, o, g, block, warps)


def all_pairs_mismatches(device: str) -> dict:
    """Every dequantization candidate on all 65,536 (v, e) pairs, groups of 4, 32 and 256: scales
    7..252 alone (the words kernel's usual path) and all scales (blocks that meet 0..6 and
    253..255 take the six steps)."""
    result = {}
    for kernel, block, warps in DEQUANTIZE_CANDIDATES:
        run = dequantize_launcher(kernel, block, warps)
        count = 0
        for group in (4, 32, 256):
            for low, high in [(7, 252), (0, 255)]:
                scales = torch.arange(low, high + 1, device=device).to(torch.uint8)
                scales = scales.repeat_interleave(256 // group)
                mantissa = torch.arange(-128, 128, device=device).to(torch.int8)
                mantissa = mantissa.repeat(high - low + 1)
                out = torch.empty(mantissa.shape, dtype=torch.bfloat16, device=device)
                run(mantissa, scales, out, group)
                count += bits_mismatches(out, dequantize_reference(mantissa, scales, group))
        result[f"{kernel} {block}/{warps}"] = count
    return result


def dequantize_rows(sizes: list[int], candidates, passes: int, dry: bool, device: str) -> list:
    rows = []
    for n in sizes:
        nbytes = 3 * n + n // GROUP  # 1 byte read + 2 written a value, 1 byte a group
        sets = max(1, min(3, math.ceil(4 * l2_bytes(dry) / nbytes)))
        inputs = []
        for _ in range(sets):
            mantissa = torch.randint(-128, 128, (n,), dtype=torch.int8, device=device)
            scales = torch.randint(100, 151, (n // GROUP,), device=device).to(torch.uint8)
            out = torch.empty(n, dtype=torch.bfloat16, device=device)
            inputs.append((mantissa, scales, out))
        copies = [
            [torch.empty(nbytes // 2, dtype=torch.uint8, device=device) for _ in range(2)]
            for _ in range(sets)
        ]
        named = {"copy": [lambda c=c: c[1].copy_(c[0]) for c in copies]}
        for kernel, block, warps in candidates:
            run = dequantize_launcher(kernel, block, warps)
            named[f"{kernel} {block}/{warps}"] = [
                lambda i=i, r=run: r(i[0], i[1], i[2], GROUP) for i in inputs
            ]
        # all scales 0..255 at random: blocks mostly take the six steps (no weight has these)
        special = torch.randint(0, 256, (n // GROUP,), device=device).to(torch.uint8)
        best_words = words_config(torch.device(device))
        run = dequantize_launcher("words", *best_words)
        named[f"words {best_words[0]}/{best_words[1]} random scales 0..255"] = [
            lambda i=i, r=run, s=special: r(i[0], s, i[2], GROUP) for i in inputs
        ]
        mantissa, scales, out = inputs[0]
        mismatches = bits_mismatches(
            dequantize(mantissa, scales, GROUP), dequantize_reference(mantissa, scales, GROUP)
        )
        times = timed(named, passes, dry)
        row = {"elements": n, "bytes": nbytes, "us": times, "default_mismatches": mismatches}
        copy_us = times["copy"]
        row["tbps"] = {k: nbytes / v / 1e6 for k, v in times.items() if not isinstance(v, str)}
        row["of_copy"] = {
            k: copy_us / v for k, v in times.items() if not isinstance(v, str) and k != "copy"
        }
        rows.append(row)
        best = max(
            row["of_copy"].items(), key=lambda item: item[1] if "random" not in item[0] else 0
        )
        log(
            f"dequantize 2^{n.bit_length() - 1}: copy {row['tbps']['copy']:.2f} TB/s, best "
            f"{best[0]} {best[1]:.3f} of copy; "
            + ", ".join(f"{k} {v:.3f}" for k, v in row["of_copy"].items())
        )
        del inputs, copies
        if not dry:
            torch.cuda.empty_cache()
    return rows


# --- The linear ---------------------------------------------------------------------------------
def linear_problem(n, k, m, configs, weights, bf16_weights, passes, dry, device) -> dict:
    x = torch.randn(m, k, device=device).to(torch.bfloat16)
    bias = torch.randn(n, device=device).to(torch.bfloat16)
    expected = mxint8_linear_reference(x, *weights[0], bias, GROUP)
    named = {"bf16 F.linear": [lambda w=w: F.linear(x, w, bias) for w in bf16_weights]}
    named["dequantize + F.linear"] = [
        lambda c=c: F.linear(x, dequantize(*c, GROUP), bias) for c in weights
    ]
    errors = {}
    for config in configs:
        name = repr(config)
        try:
            y = mxint8_linear(x, *weights[0], bias, GROUP, config=config)
            errors[name] = relative_error(y, expected)
        except Exception as error:
            errors[name] = f"{type(error).__name__}: {str(error)[:300]}"
            continue
        named[name] = [
            lambda c=c, f=config: mxint8_linear(x, *c, bias, GROUP, config=f) for c in weights
        ]
    times = timed(named, passes, dry)
    fused = {k: v for k, v in times.items() if k not in ("bf16 F.linear", "dequantize + F.linear")}
    numbers = {k: v for k, v in fused.items() if not isinstance(v, str)}
    best = min(numbers, key=numbers.get) if numbers else None
    row = {"n": n, "k": k, "m": m, "us": times, "relative_error": errors, "best": best}
    row["configs"] = {repr(c): c.__dict__ for c in configs}
    log(
        f"{n}x{k} batch {m}: bf16 {times['bf16 F.linear']:.1f} us, dequantize + F.linear "
        f"{times['dequantize + F.linear']:.1f}, best {numbers.get(best, float('nan')):.1f} "
        f"{best} ({len(numbers)} timed, {len(fused) - len(numbers)} failed)"
    )
    return row


FAILED_DIR = Path("/tmp/mxint8_sweep_failed")  # configs that failed in a compile process


def failed_configs() -> set:
    """reprs of the configs a compile process could not run (they are not timed)."""
    failed = set()
    for path in FAILED_DIR.glob("*.json") if FAILED_DIR.is_dir() else ():
        failed |= set(json.loads(path.read_text()))
    return failed


def linear_rows(batches, passes, dry, device, confirm: bool, save=None) -> list:
    rows = []
    shapes = [(256, 256)] if dry else SHAPES
    for n, k in shapes:
        torch.manual_seed(0)
        weights = [
            quantize(torch.randn(n, k, device=device) * 0.02, GROUP)
            for _ in range(rotations(n * k, dry))
        ]
        bf16_weights = [dequantize(*c, GROUP) for c in weights[: rotations(2 * n * k, dry)]]
        for m in batches:
            if confirm:
                configs = [table_choice(m, n, k, device)]
            else:
                configs = fused_candidates(m, n, k, dry)
            skipped = failed_configs()
            configs = [c for c in configs if c is not None and repr(c) not in skipped]
            rows.append(
                linear_problem(n, k, m, configs, weights, bf16_weights, passes, dry, device)
            )
            if save:
                save(rows)
        del weights, bf16_weights
        if not dry:
            torch.cuda.empty_cache()
    return rows


def table_choice(m: int, n: int, k: int, device: str) -> LinearConfig | None:
    """What ``mxint8_linear`` runs for this problem without a config: the table's entry (or
    the default), None where it dequantizes once."""
    if chosen_path(m, n, k, GROUP, True, device) == "dequantize_once":
        return None
    return choose_config(m, n, k, GROUP, device)[0]


# --- Nsight Compute -----------------------------------------------------------------------------
NCU_SECTIONS = ["SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats"]
NCU_EVERY_KERNEL = ("mma",)  # profiled as each row's fastest of its kind, too


def ncu_case(case: str) -> None:
    """Run one problem a few times (the child process that ncu profiles)."""
    kind, *rest = json.loads(case)
    device = "cuda"
    if kind in ("words", "six_steps"):
        n, block, warps = rest
        mantissa = torch.randint(-128, 128, (n,), dtype=torch.int8, device=device)
        scales = torch.randint(100, 151, (n // GROUP,), device=device).to(torch.uint8)
        out = torch.empty(n, dtype=torch.bfloat16, device=device)
        run = dequantize_launcher(kind, block, warps)
        for _ in range(4):
            run(mantissa, scales, out, GROUP)
    else:
        n, k, m, fields = rest
        config = LinearConfig(**fields)
        mantissa, scales = quantize(torch.randn(n, k, device=device) * 0.02, GROUP)
        x = torch.randn(m, k, device=device).to(torch.bfloat16)
        for _ in range(4):
            mxint8_linear(x, mantissa, scales, None, GROUP, config=config)
    torch.cuda.synchronize()


def ncu_profile(case: list, path: Path, name: str) -> dict:
    """Nsight Compute's speed of light, occupancy and warp stalls for the 4th launch of the case's
    kernels (Triton's, named mxint8 or dequantize; clocks left as they are)."""
    command = [
        "ncu",
        "--clock-control",
        "none",
        *[a for s in NCU_SECTIONS for a in ("--section", s)],
        "-k",
        "regex:mxint8|dequantize",
        "--launch-skip",
        "3",
        "--launch-count",
        "1",
        sys.executable,
        __file__,
        "--ncu-case",
        json.dumps(case),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": repr(error)}
    with path.open("a") as report:
        report.write(f"===== {name}: {case}\n{done.stdout}{done.stderr[-2000:]}\n")
    keys = (
        "Memory Throughput",
        "DRAM Throughput",
        "Compute (SM) Throughput",
        "Duration",
        "Registers Per Thread",
        "Achieved Occupancy",
        "Theoretical Occupancy",
        "Block Limit Registers",
        "Issue Slots Busy",
        "Warp Cycles Per Issued Instruction",
    )
    found = {}
    for line in done.stdout.splitlines():
        for key in keys:
            if line.strip().startswith(key) and key not in found:
                found[key] = " ".join(line.split()[len(key.split()) :])
    hints = [line.strip() for line in done.stdout.splitlines() if "bound" in line.lower()]
    found["hints"] = hints[:4]
    return found


# --- Main ---------------------------------------------------------------------------------------
def precompile(jobs: int) -> None:
    """Compile every candidate in ``jobs`` child processes sharing Triton's cache, so that the
    timing process only loads binaries."""
    batches = ["--batches", ",".join(map(str, BATCHES))]
    children = [
        subprocess.Popen([sys.executable, __file__, "--compile-part", f"{i}/{jobs}", *batches])
        for i in range(jobs)
    ]
    for child in children:
        child.wait()


def compile_part(part: str) -> None:
    index, total = (int(p) for p in part.split("/"))
    device = "cuda"
    work = []
    for n, k in SHAPES:
        for m in BATCHES:
            work += [(n, k, m, c) for c in fused_candidates(m, n, k, False)]
    weights, failed = {}, []
    FAILED_DIR.mkdir(exist_ok=True)
    for i, (n, k, m, config) in enumerate(work):
        if i % total != index:
            continue
        if (n, k) not in weights:
            weights[(n, k)] = quantize(torch.randn(n, k, device=device) * 0.02, GROUP)
        x = torch.randn(m, k, device=device).to(torch.bfloat16)
        bias = torch.randn(n, device=device).to(torch.bfloat16)
        try:
            mxint8_linear(x, *weights[(n, k)], bias, GROUP, config=config)
            torch.cuda.synchronize()
        except Exception as error:
            print(f"compile {config}: {type(error).__name__}: {str(error)[:200]}", flush=True)
            failed.append(repr(config))
            if "CUDA" in str(error) or "illegal" in str(error):
                break  # the context is lost: the timing process compiles the rest itself
        (FAILED_DIR / f"{index}.json").write_text(json.dumps(failed))


def summary(result: dict) -> str:
    lines = [f"# MXINT8 sweep on {result['device']} ({result['mode']})", ""]
    lines += [
        f"torch {result['torch']}, triton {result['triton']}; copy bandwidth for the floor "
        f"{result['floor_tbps']:.2f} TB/s",
        "",
    ]
    lines += [
        "| dequantize | copy TB/s | kernel | TB/s | of copy |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in result["dequantize"]:
        for name, ratio in sorted(row["of_copy"].items(), key=lambda item: -item[1]):
            lines.append(
                f"| 2^{row['elements'].bit_length() - 1} | {row['tbps']['copy']:.2f} | "
                f"{name} | {row['tbps'][name]:.2f} | {ratio:.3f} |"
            )
    lines += [
        "",
        "| N x K, batch | bf16 | dequantize + linear | fused (best) | floor | "
        "fused / floor | x bf16 | best config |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["linear"]:
        us = row["us"]
        best = us.get(row["best"], float("nan")) if row["best"] else float("nan")
        floor = row["floor_us"]
        lines.append(
            f"| {row['n']}x{row['k']}, {row['m']} | {us['bf16 F.linear']:.1f} | "
            f"{us['dequantize + F.linear']:.1f} | {best:.1f} | {floor:.1f} | {floor / best:.0%} | "
            f"{us['bf16 F.linear'] / best:.2f}x | {row['best']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="sweep-out")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--confirm", action="store_true", help="time the tables' choices only")
    parser.add_argument("--dry", action="store_true", help="CPU, interpreter, toy sizes")
    parser.add_argument("--jobs", type=int, default=0, help="compile candidates in N processes")
    parser.add_argument("--skip-dequantize", action="store_true")
    parser.add_argument("--batches", help="comma-separated batch sizes (default 1,16,512)")
    parser.add_argument("--ncu", action="store_true", help="Nsight Compute per chosen kernel")
    parser.add_argument("--compile-part", help=argparse.SUPPRESS)
    parser.add_argument("--ncu-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batches:
        BATCHES[:] = [int(b) for b in args.batches.split(",")]
    if args.compile_part:
        return compile_part(args.compile_part)
    if args.ncu_case:
        return ncu_case(args.ncu_case)
    if args.dry and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("--dry needs TRITON_INTERPRET=1 set before Python starts")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.dry else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    import triton

    result = {
        "device": "cpu (dry)" if args.dry else torch.cuda.get_device_name(),
        "mode": "confirm" if args.confirm else ("dry" if args.dry else "sweep"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": " ".join(sys.argv),
    }
    log(result)
    if args.jobs and not args.dry and not args.confirm:
        precompile(args.jobs)
        log("precompiled")
    result["all_pairs_mismatches"] = all_pairs_mismatches(device)
    log("all pairs, mismatches per dequantization candidate:", result["all_pairs_mismatches"])
    candidates = DEQUANTIZE_CANDIDATES
    if args.confirm:
        candidates = [("six_steps", 2048, 4), ("words", *words_config(torch.device(device)))]
    sizes = [2**12, 2**14] if args.dry else DEQUANTIZE_SIZES
    result["dequantize"] = dequantize_rows(sizes, candidates, args.passes, args.dry, device)
    largest = result["dequantize"][-1]
    result["floor_tbps"] = largest["tbps"]["copy"]
    (out / "sweep.json").write_text(json.dumps(result, indent=1))
    batches = [1, 16, 64] if args.dry and not args.batches else BATCHES

    def save(rows):
        (out / "sweep.json").write_text(json.dumps(result | {"linear": rows}, indent=1))

    result["linear"] = linear_rows(batches, args.passes, args.dry, device, args.confirm, save)
    for row in result["linear"]:
        weight_bytes = row["n"] * row["k"] * (1 + 1 / GROUP)
        row["floor_us"] = weight_bytes / (result["floor_tbps"] * 1e6)
    (out / "sweep.json").write_text(json.dumps(result, indent=1))
    (out / "summary.md").write_text(summary(result))
    print(summary(result), flush=True)
    if args.ncu and not args.dry:
        result["ncu"] = profiles(result, out)
        (out / "sweep.json").write_text(json.dumps(result, indent=1))
    log("done")


def shape(row: dict) -> tuple[int, int, int]:
    return row["n"], row["k"], row["m"]


def profiles(result: dict, out: Path) -> dict:
    if not shutil.which("ncu"):
        log("ncu is not installed here")
        return {"error": "ncu not installed"}
    cases = {
        "dequantize words 2^28": ["words", 2**28, *words_config(torch.device("cuda"))],
        "dequantize six steps 2^28": ["six_steps", 2**28, 2048, 4],
    }
    for row in result["linear"]:
        if row["best"]:
            fields = row["configs"][row["best"]]
            cases[f"{row['n']}x{row['k']} batch {row['m']}"] = ["linear", *shape(row), fields]
        for kernel in NCU_EVERY_KERNEL:
            timed = {
                name: us
                for name, us in row["us"].items()
                if row["configs"].get(name, {}).get("kernel") == kernel and not isinstance(us, str)
            }
            fastest = min(timed, key=timed.get, default=None)
            if fastest not in (None, row["best"]):
                case = ["linear", *shape(row), row["configs"][fastest]]
                cases[f"{row['n']}x{row['k']} batch {row['m']} fastest {kernel}"] = case
    found = {}
    for name, case in cases.items():
        found[name] = ncu_profile(case, out / "ncu.txt", name)
        log("ncu", name, found[name])
    return found


if __name__ == "__main__":
    main()
