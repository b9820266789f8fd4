"""Regenerate the small run fixtures of tests/test_cli.py and tests/test_cli_compare.py from the
two real baselines.

    python tests/data/make_fixtures.py

Each fixture keeps a few benchmarks of a real run with their extra_info and median, and replaces
the per-round data by 7 seeded draws around that median (1 % noise), so the statistics are
predictable. Three runs of the H100 key: 0001 and 0002 share an environment; 0003 has another
torch, one benchmark twice as slow, one benchmark dropped and one new implementation added.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
H100 = ROOT / "baselines/NVIDIA-H100-80GB-HBM3/Linux-CPython-3.12-64bit/0001_h100-full.json"
CPU = ROOT / "baselines/AMD-EPYC-2cores/Linux-CPython-3.11-64bit/0001_cpu-default.json"
H100_KEEP = [
    "test_resnet18_steady[cuda-1-eager]",
    "test_resnet18_steady[cuda-1-compiled]",
    "test_resnet18_steady[cuda-128-eager]",
    "test_resnet18_steady[cuda-128-compiled]",
    "test_resnet18_calls[cuda-2000-eager]",
    "test_resnet18_calls[cuda-2000-compiled]",
    "test_attention[cuda-32x8x128x64-naive-fp16]",
    "test_attention[cuda-32x8x128x64-flash-fp16]",
    "test_attention[cuda-32x8x128x64-cudnn-fp16]",
    "test_attention[cuda-32x8x128x64-math-fp16]",
    "test_attention[cuda-32x8x128x64-naive-fp32]",
    "test_attention[cuda-32x8x128x64-efficient-fp32]",
    "test_dequantize[cuda-33554432-triton-32]",
    "test_dequantize[cuda-33554432-reference_compiled-32]",
    "test_dequantize[cuda-268435456-triton-32]",
    "test_dequantize[cuda-268435456-reference-32]",
    "test_dequantize[cuda-268435456-reference_compiled-32]",
    "test_linear[cuda-4096x4096-1-dense-bf16]",
    "test_linear[cuda-4096x4096-1-mxint8-bf16]",
    "test_encoder[cuda-bert-basex8x128-fp32]",
    "test_encoder[cuda-bert-basex8x128-bf16]",
    "test_encoder[cuda-bert-basex8x128-mxint8]",
]
CPU_KEEP = [
    "test_resnet18_steady[cpu-1-eager]",
    "test_resnet18_steady[cpu-1-compiled]",
    "test_resnet18_calls[cpu-200-eager]",
    "test_resnet18_calls[cpu-200-compiled]",
    "test_attention[cpu-32x8x128x64-naive-fp32]",
    "test_attention[cpu-32x8x128x64-flash-fp32]",
    "test_attention[cpu-32x8x128x64-math-fp32]",
    "test_dequantize[cpu-1048576-reference-32]",
    "test_dequantize[cpu-1048576-reference_compiled-32]",
    "test_linear[cpu-2048x2048-1-dense-fp32]",
    "test_linear[cpu-2048x2048-1-mxint8-fp32]",
    "test_encoder[cpu-bert-smallx2x64-fp32]",
    "test_encoder[cpu-bert-smallx2x64-mxint8]",
]
SLOWER = "test_attention[cuda-32x8x128x64-flash-fp16]"  # twice as slow in run 0003
DROPPED = "test_attention[cuda-32x8x128x64-math-fp16]"  # absent from run 0003
NEW_FROM = "test_linear[cuda-4096x4096-1-mxint8-bf16]"  # copied as mxint8_fused into run 0003
DROP_EXTRA = {
    "clock",
    "calls_per_iteration",
    "iterations",
    "rounds",
    "do_bench_s",
    "host_enqueue_s",
}


def _round(value):
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def _trim(benchmark: dict, rng: np.random.Generator, factor: float = 1.0) -> dict:
    rounds = min(benchmark["stats"]["rounds"], 7)
    data = benchmark["stats"]["median"] * factor * (1 + 0.01 * rng.standard_normal(rounds))
    q1, mid, q3 = np.percentile(data, [25, 50, 75])
    extra = {k: v for k, v in benchmark["extra_info"].items() if k not in DROP_EXTRA}
    for key in ("tflops", "gbps", "fraction_of_copy"):
        if key in extra:
            extra[key] /= factor
    stats = dict(
        min=data.min(), max=data.max(), mean=data.mean(), rounds=rounds, median=mid,
        iqr=q3 - q1, q1=q1, q3=q3, iterations=benchmark["stats"]["iterations"], data=list(data),
    )  # fmt: skip
    keep = ("group", "name", "fullname", "params")
    return _round({**{k: benchmark[k] for k in keep}, "extra_info": extra, "stats": stats})


def _renamed(benchmark: dict, old: str, new: str) -> dict:
    text = json.dumps(benchmark).replace(f"-{old}-", f"-{new}-").replace(f'"{old}"', f'"{new}"')
    return json.loads(text)


def _run(source: dict, names: list[str], seed: int, **changes) -> dict:
    rng = np.random.default_rng(seed)
    by_name = {b["name"]: b for b in source["benchmarks"]}
    benchmarks = []
    for name in names:
        if changes.get("drop") == name:
            continue
        factor = 2.0 if changes.get("slower") == name else 1.0
        benchmarks.append(_trim(by_name[name], rng, factor))
        if changes.get("new_from") == name:
            fused = _renamed(_trim(by_name[name], rng, 0.5), "mxint8", "mxint8_fused")
            benchmarks.append(fused)
    machine_info = copy.deepcopy(source["machine_info"])
    for key in ("cpu", "python_build", "python_compiler", "release", "node", "processor"):
        machine_info.pop(key, None)
    if "torch" in changes:
        machine_info["perfgate"]["software"]["torch"] = changes["torch"]
    return {
        "machine_info": machine_info,
        "commit_info": {"id": f"fixture{seed}", "dirty": False, "project": "perfgate"},
        "benchmarks": benchmarks,
        "datetime": changes.get("date", source["datetime"]),
        "version": source["version"],
    }


def _write(run: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # one benchmark per line: small files that still diff well
    head = json.dumps({k: v for k, v in run.items() if k != "benchmarks"}, indent=1)[:-2]
    lines = ",\n  ".join(json.dumps(b) for b in run["benchmarks"])
    path.write_text(f'{head},\n "benchmarks": [\n  {lines}\n ]\n}}\n')
    print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


def main() -> None:
    h100, cpu = json.loads(H100.read_text()), json.loads(CPU.read_text())
    folder = HERE / "baselines/NVIDIA-H100-80GB-HBM3/Linux-CPython-3.12-64bit"
    _write(_run(h100, H100_KEEP, 1, date="2026-11-20T10:00:00+00:00"), folder / "0001_base.json")
    _write(_run(h100, H100_KEEP, 2, date="2026-11-21T10:00:00+00:00"), folder / "0002_rerun.json")
    upgrade = _run(
        h100, H100_KEEP, 3, date="2026-11-22T10:00:00+00:00", torch="2.12.0+cu130",
        slower=SLOWER, drop=DROPPED, new_from=NEW_FROM,
    )  # fmt: skip
    _write(upgrade, folder / "0003_torch-2.12.json")
    _write(_run(cpu, CPU_KEEP, 4), HERE / "cpu-run.json")


if __name__ == "__main__":
    main()
