"""GPU check of the MXINT8 dequantization kernel: bit-exactness, offsets past 2^31, and a
bandwidth table (kernel configs vs same-size copy vs torch.compile'd reference).

Run on a CUDA machine: ``python tools/mxint8_gpu_check.py [--out results.json]``.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.testing

from kernels.mxint8 import _dequantize_kernel, dequantize, dequantize_reference

CONFIGS = [(1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8), (8192, 8), (8192, 16)]


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> int:
    """Number of mismatching bf16 bit patterns (any NaN matches any NaN)."""
    nan = torch.isnan(a) & torch.isnan(b)
    return int(((a.view(torch.int16) != b.view(torch.int16)) & ~nan).sum())


def exhaustive() -> int:
    v = torch.arange(-128, 128, device="cuda").to(torch.int8).repeat_interleave(256)
    e = torch.arange(256, device="cuda").to(torch.uint8).repeat(256)
    return bits_equal(dequantize(v, e, 1), dequantize_reference(v, e, 1))


def past_2_31() -> int:
    n = 2**31 + 4096 * 3
    m = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
    s = torch.randint(0, 256, (n // 32,), device="cuda").to(torch.uint8)
    out = dequantize(m, s, 32)
    tail = 2**21
    got = out[-tail:]
    del out
    return bits_equal(got, dequantize_reference(m[-tail:], s[-tail // 32 :], 32))


def launch(m, s, out, group, block, warps):
    grid = (triton.cdiv(m.numel(), block),)
    _dequantize_kernel[grid](m, s, out, m.numel(), GROUP_SIZE=group, BLOCK_SIZE=block, num_warps=warps)


def bandwidth_table(sizes, groups):
    rows = []
    compiled = torch.compile(dequantize_reference, dynamic=False)
    for n in sizes:
        for g in groups:
            m = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda")
            s = torch.randint(100, 150, (n // g,), device="cuda").to(torch.uint8)
            out = torch.empty(n, dtype=torch.bfloat16, device="cuda")
            nbytes = 3 * n + n // g
            half = nbytes // 2
            src = torch.empty(half, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
            row = {"elements": n, "group": g, "bytes": nbytes, "copy_ms": copy_ms,
                   "copy_tbps": nbytes / copy_ms / 1e9}
            for block, warps in CONFIGS:
                ms = triton.testing.do_bench(lambda: launch(m, s, out, g, block, warps), return_mode="median")
                row[f"triton_{block}_{warps}_ms"] = ms
            row["mismatches_default"] = bits_equal(dequantize(m, s, g), dequantize_reference(m, s, g))
            if n <= 2**28:
                ms = triton.testing.do_bench(lambda: compiled(m, s, g), return_mode="median")
                row["compiled_ref_ms"] = ms
            rows.append(row)
            best = min((row[f"triton_{b}_{w}_ms"], b, w) for b, w in CONFIGS)
            print(f"2^{n.bit_length()-1} g{g}: copy {row['copy_tbps']:.2f} TB/s | best {best[1]}/{best[2]} "
                  f"{nbytes/best[0]/1e9:.2f} TB/s ({row['copy_ms']/best[0]*100:.0f}% of copy) | "
                  + " ".join(f"{b}/{w}:{nbytes/row[f'triton_{b}_{w}_ms']/1e9:.2f}" for b, w in CONFIGS)
                  + (f" | compiled ref {nbytes/row['compiled_ref_ms']/1e9:.2f} TB/s" if "compiled_ref_ms" in row else ""),
                  flush=True)
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
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
