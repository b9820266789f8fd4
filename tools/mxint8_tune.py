"""Measure the fused MXINT8 linear's candidate configs for the matrix's problems on this GPU and
write the fastest of each into kernels/mxint8/pinned_configs.json (merged with what is there).

Each candidate is timed by ``triton.testing.do_bench`` (L2 flushed, median of 100 ms), in three
interleaved passes; the config with the lowest median over the passes wins. Run on the GPU model
the table is for: ``PYTHONPATH=$PWD python3 tools/mxint8_tune.py [--out copy.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton.testing

from kernels.mxint8 import quantize
from kernels.mxint8.linear_launch import launch
from kernels.mxint8.tuning import PINNED_CONFIGS, candidate_configs, config_json, pinned_key

PROBLEMS = [(16, 4096, 4096), (16, 14336, 4096)]  # (batch bucket, N, K) of perf_tests' Linear
GROUP = 32
PASSES = 3


def tune(m: int, n: int, k: int) -> tuple[str, dict]:
    weight = torch.randn(n, k, device="cuda") / k**0.5
    mantissa, scales = quantize(weight, GROUP)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    configs = candidate_configs(m, n, k)
    times = {c: [] for c in configs}
    for _ in range(PASSES):
        for c in configs:
            run = lambda c=c: launch(x, mantissa, scales, bias, out, GROUP, c)  # noqa: E731
            times[c].append(triton.testing.do_bench(run, warmup=25, rep=100) * 1e3)
    medians = {c: statistics.median(t) for c, t in times.items()}
    best = min(medians, key=medians.get)
    entry = {
        "config": config_json(best),
        "us": round(medians[best], 2),
        "candidates": {str(c): round(t, 2) for c, t in sorted(medians.items(), key=lambda i: i[1])},
    }
    return pinned_key(m, n, k, GROUP, True, "cuda"), entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args()
    table = json.loads(PINNED_CONFIGS.read_text()) if PINNED_CONFIGS.is_file() else {}
    for m, n, k in PROBLEMS:
        key, entry = tune(m, n, k)
        table[key] = entry
        print(key, entry["us"], "us", entry["config"], flush=True)
        for name, us in entry["candidates"].items():
            print(f"    {us:8.2f} us  {name}")
    text = json.dumps(table, indent=2, sort_keys=True) + "\n"
    PINNED_CONFIGS.write_text(text)
    if args.out:
        with open(args.out, "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
