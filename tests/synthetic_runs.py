"""Synthetic pytest-benchmark runs for the verdict tests: per-round seconds with seeded lognormal
noise, declarations as the perfgate marker saves them, loaded with ``run_from_json``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from perfgate import Ratio
from perfgate.benchmark import Run, run_from_json

SPEEDUP = Ratio("speedup over naive attention", key="implementation", reference="naive")
SDPA = {"family": "sdpa", "ratios": [SPEEDUP.as_json()]}
COMPILE_SPEEDUP = Ratio("speedup of compiled over eager", key="mode", reference="eager")
COMPILE = {"family": "compile", "ratios": [COMPILE_SPEEDUP.as_json()]}
DENSE_LATENCY = Ratio(
    "latency relative to dense", key="implementation", reference="dense", higher_is_better=False
)
COPY_FRACTION = Ratio("fraction of the copy roofline", field="fraction_of_copy")
DATETIME = "2026-11-20T10:00:00+00:00"


def lognormal_rounds(rng: np.random.Generator, n: int, cv: float, median_s: float = 1e-3):
    """``n`` per-round durations (seconds) with lognormal noise of coefficient of variation cv."""
    return median_s * rng.lognormal(0.0, math.sqrt(math.log1p(cv**2)), n)


def rounds(seed: int, slowdown: float = 1.0, n: int = 30, cv: float = 0.05) -> list[float]:
    """Rounds around 1 ms (times ``slowdown``), noise from ``seed``."""
    return list(lognormal_rounds(np.random.default_rng(seed), n, cv) * slowdown)


def rounds_at(median_s: float, seed: int, n: int = 30, cv: float = 0.03) -> list[float]:
    """Rounds whose median is exactly ``median_s`` seconds."""
    noise = np.random.default_rng(seed).lognormal(0.0, cv, n)
    return list(median_s * noise / np.median(noise))


def entry(
    fullname: str,
    samples: list[float] | None,
    params: dict | None = None,
    extra: dict | None = None,
    declared: dict | None = None,
    median: float | None = None,
) -> dict:
    """One benchmark as pytest-benchmark saves it; ``samples`` None saves no per-round data."""
    stats = {"median": median if median is not None else float(np.median(samples))}
    if samples is not None:
        stats["data"] = list(samples)
    extra = dict(extra or {})
    if declared:
        extra["perfgate"] = declared
    name = fullname.split("::")[-1]
    return {"name": name, "fullname": fullname, "params": params or {}, "extra_info": extra,
            "stats": stats, "group": None}  # fmt: skip


def run_json(*entries: dict, datetime: str = DATETIME, software: dict | None = None,
             untrusted: list[str] | None = None, key: str = "TEST-KEY") -> dict:  # fmt: skip
    perfgate = {"hardware_key": key, "software": software or {"torch": "2.13.0"}}
    if untrusted:
        perfgate["gpu_health"] = {"trusted": False, "untrusted_reasons": untrusted}
    return {
        "machine_info": {"perfgate": perfgate},
        "commit_info": {"id": "abc123"},
        "benchmarks": list(entries),
        "datetime": datetime,
        "version": "5.2.3",
    }


def run_of(*entries: dict, path: Path | None = None, **facts) -> Run:
    return run_from_json(json.loads(json.dumps(run_json(*entries, **facts))), path)


RUN_FACTS = {"datetime", "software", "untrusted", "key", "path"}


def single(name: str, samples, **fields) -> Run:
    """A run of one benchmark ``perf_tests/test_x.py::<name>``; ``fields`` go to ``entry``,
    except the run's own facts (``untrusted``, ``software``, ``datetime``, ``key``, ``path``)."""
    facts = {k: fields.pop(k) for k in RUN_FACTS & set(fields)}
    return run_of(entry(f"perf_tests/test_x.py::{name}", samples, **fields), **facts)


def attention(implementation: str, median_s: float, seed: int, declared: bool = True) -> dict:
    name = f"perf_tests/test_sdpa.py::test_attention[cuda-32x8x128x64-{implementation}-fp16]"
    params = {"bench_device": "cuda", "shape": [32, 8, 128, 64], "dtype_name": "fp16",
              "implementation": implementation}  # fmt: skip
    return entry(name, rounds_at(median_s, seed), params, declared=SDPA if declared else None)


def attention_run(naive_s: float, flash_s: float, seed: int, **facts) -> Run:
    """naive and flash attention in one run (seeds ``seed`` and ``seed + 1``)."""
    return run_of(attention("naive", naive_s, seed), attention("flash", flash_s, seed + 1), **facts)


FLASH = attention("flash", 1.0, 0)["fullname"]
NAIVE = attention("naive", 1.0, 0)["fullname"]
