"""Merging the runs of pytest-xdist workers (one per GPU) into one run JSON.

pytest-benchmark times nothing under xdist, so the plan (docs/NOTES.md, "One worker per GPU") is
that each worker times its share of the cases on its own GPU and writes its run JSON, and the
controller merges them here into the one run a baseline or the gate reads. Only this merge is
built so far.
"""

from __future__ import annotations

import copy


class MergeError(ValueError):
    """Worker runs that cannot be one run; the message says which workers and why."""


def merge_worker_runs(runs: dict[str, dict]) -> dict:
    """One pytest-benchmark run JSON from ``{worker id: its run JSON}``.

    Every worker must have run on the same hardware key; a benchmark run by two workers is an
    error. Each benchmark records its worker in ``extra_info["worker"]``; the GPU is trusted
    only if every worker's was, and each untrusted reason names its worker.
    """
    if not runs:
        raise MergeError("no worker wrote a run: nothing to merge")
    workers = sorted(runs)
    first = runs[workers[0]]
    keys = {w: _perfgate(runs[w]).get("hardware_key") for w in workers}
    if len(set(keys.values())) > 1:
        listing = ", ".join(f"{w}: {k}" for w, k in keys.items())
        raise MergeError(f"workers ran on different hardware ({listing}); one key per run")
    merged = copy.deepcopy({k: v for k, v in first.items() if k != "benchmarks"})
    merged["datetime"] = min(str(runs[w].get("datetime") or "") for w in workers)
    merged["benchmarks"] = _benchmarks(runs, workers)
    _perfgate(merged)["gpu_health"] = _health(runs, workers)
    _perfgate(merged)["workers"] = workers
    return merged


def _perfgate(run: dict) -> dict:
    return (run.get("machine_info") or {}).get("perfgate") or {}


def _benchmarks(runs: dict[str, dict], workers: list[str]) -> list[dict]:
    seen: dict[str, str] = {}
    benchmarks = []
    for worker in workers:
        for entry in runs[worker].get("benchmarks") or []:
            name = entry.get("fullname") or entry.get("name")
            if name in seen:
                raise MergeError(f"{name} was run by both {seen[name]} and {worker}")
            seen[name] = worker
            entry = copy.deepcopy(entry)
            entry.setdefault("extra_info", {})["worker"] = worker
            benchmarks.append(entry)
    return benchmarks


def _health(runs: dict[str, dict], workers: list[str]) -> dict:
    per_worker = {w: _perfgate(runs[w]).get("gpu_health") or {} for w in workers}
    reasons = [
        f"{worker}: {reason}"
        for worker, health in per_worker.items()
        if not health.get("trusted", True)
        for reason in health.get("untrusted_reasons") or ["GPU health not trusted"]
    ]
    merged = dict(per_worker[workers[0]])
    merged.update(trusted=not reasons, untrusted_reasons=reasons, per_worker=per_worker)
    return merged
