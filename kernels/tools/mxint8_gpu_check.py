"""GPU check of the MXINT8 dequantization kernel: bit-exactness, offsets past 2^31, and a
bandwidth table (kernel configs vs same-size copy vs torch.compile'd reference).

Run on a CUDA machine: ``python kernels/tools/mxint8_gpu_check.py [--out results.json]``.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton.testing

from kernels.mxint8 import dequantize, dequantize_reference
from kernels.mxint8.dequantize_kernel import launch_dequantize

CONFIGS = [(1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (8192, 8), (8192, 16)]


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> int:
    """Number of mismatching bf16 bit patterns (any NaN matches any NaN)."""
    nan = torch.isnan(a) & torch.isnan(b)
    return int(((a.view(torch.int16) != b.view(torch.int16)) & ~nan).sum())


def exhaustive() -> int:
    # group size 1 (per-element path) and 256 (tile path) both see every (mantissa, scale) pair
    v = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat_interleave(256)
    e = torch.arange(256, device="cuda").to(torch.uint8).repeat(256)
    per_element = bits_equal(dequantize(v, e, 1), dequantize_reference(v, e, 1))
    v2 = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat(256)
    e2 = torch.arange(256, device="cuda").to(torch.uint8)
    return per_element + bits_equal(dequantize(v2, e2, 256), dequantize_reference(v2, e2, 256))


def past_2_31() -> int:
    n = 2**31 + 4096 * 3
    m = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    s = torch.randint(0, 256, (n // 32,), device="cuda").to(torch.uint8)
    out = dequantize(m, s, 32)
    tail = 2**21
    got = out[-tail:]
    del out
    return bits_equal(got, dequantize_reference(m[-tail:], s[-tail // 32 :], 32))


def time_ms(fn) -> float:
    return triton.testing.do_bench(fn, return_mode="median")


def bandwidth_row(n: int, g: int) -> dict:
    m = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    s = torch.randint(100, 150, (n // g,), device="cuda").to(torch.uint8)
    out = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    nbytes = 3 * n + n // g
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    row = {"elements": n, "group": g, "bytes": nbytes, "copy_ms": time_ms(lambda: dst.copy_(src))}
    for block, warps in CONFIGS:
        row[f"triton_{block}_{warps}_ms"] = time_ms(
            lambda b=block, w=warps: launch_dequantize(m, s, out, g, b, w)
        )
    row["mismatches"] = bits_equal(dequantize(m, s, g), dequantize_reference(m, s, g))
    torch._dynamo.reset()
    compiled = torch.compile(dequantize_reference, dynamic=False)
    row["compiled_ref_ms"] = time_ms(lambda: compiled(m, s, g))
    return row


def describe(row: dict) -> str:
    tbps = {(b, w): row["bytes"] / row[f"triton_{b}_{w}_ms"] / 1e9 for b, w in CONFIGS}
    (block, warps), best = max(tbps.items(), key=lambda item: item[1])
    copy = row["bytes"] / row["copy_ms"] / 1e9
    compiled = row["bytes"] / row["compiled_ref_ms"] / 1e9
    configs = " ".join(f"{b}/{w}:{t:.2f}" for (b, w), t in tbps.items())
    return (
        f"2^{row['elements'].bit_length() - 1} g{row['group']}: copy {copy:.2f} TB/s | best "
        f"{block}/{warps} {best:.2f} TB/s ({best / copy:.0%} of copy) | {configs} | "
        f"compiled ref {compiled:.2f} TB/s | mismatches {row['mismatches']}"
    )


def bandwidth_table(sizes, groups) -> list[dict]:
    rows = []
    for n in sizes:
        for g in groups:
            rows.append(bandwidth_row(n, g))
            print(describe(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    result = {"exhaustive_mismatches": exhaustive()}
    print("exhaustive mismatches:", result["exhaustive_mismatches"], flush=True)
    result["past_2_31_mismatches"] = past_2_31()
    print("past 2^31 tail mismatches:", result["past_2_31_mismatches"], flush=True)
    torch.cuda.empty_cache()
    sizes = [2**20, 2**22, 2**24, 2**25, 2**26, 2**28]
    result["table"] = bandwidth_table(sizes, [32, 128])
    result["table_group_96"] = bandwidth_table([96 * 2**18], [96])  # the per-element scale path
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
