"""Synthetic run histories for the triage tests: pytest-benchmark JSON files with a known step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

KEY = "Synthetic-CPU-2cores"
STEPPED = "test_kernel[cpu-stepped]"
FLAT = "test_kernel[cpu-flat]"


def run_json(number: int, medians: dict[str, float], torch: str, rng) -> dict:
    """One run: per benchmark 9 rounds spread 1 % around its median, and a fraction_of_copy."""
    benchmarks = []
    for name, median in medians.items():
        rounds = median * (1 + 0.01 * rng.standard_normal(9))
        rounds[4] = median
        benchmarks.append(
            {
                "name": name,
                "fullname": f"perf_tests/test_synthetic.py::{name}",
                "group": "synthetic",
                "params": {},
                "stats": {"median": float(np.median(rounds)), "data": rounds.tolist()},
                "extra_info": {"fraction_of_copy": 0.5 * 1e-3 / median, "device": "cpu"},
            }
        )
    software = {"python": "3.11", "torch": torch, "triton": "3.6.0"}
    return {
        "machine_info": {"perfgate": {"hardware_key": KEY, "software": software}},
        "commit_info": {"id": f"{number:04d}" + "c0ffee" * 6},
        "datetime": f"2026-11-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00",
        "benchmarks": benchmarks,
    }


def write_history(root: Path, runs: int = 24, step_at: int = 12, seed: int = 0) -> Path:
    """``runs`` saved runs under root/KEY: STEPPED is 10 % slower from run ``step_at`` on (1 %
    run-to-run noise), FLAT never changes; torch changes at run ``runs - 6``. Returns the
    hardware folder."""
    rng = np.random.default_rng(seed)
    folder = root / KEY / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    for i in range(runs):
        noise = 1 + 0.01 * rng.standard_normal(2)
        medians = {
            STEPPED: 1e-3 * (1.10 if i >= step_at else 1.0) * noise[0],
            FLAT: 2e-3 * noise[1],
        }
        torch = "2.13.0" if i < runs - 6 else "2.14.0"
        data = run_json(i, medians, torch, rng)
        (folder / f"{i + 1:04d}_nightly.json").write_text(json.dumps(data))
    return folder
