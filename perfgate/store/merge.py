"""Joining the parts of one run into the run they make: the runs of pytest-xdist workers (one per
GPU, ``workers.py``) or of CI shards (``--perf-shard I/N``, ``perfgate merge``).

The parts must be one run: the same hardware key and the same commit, and no case in two parts;
shards must also be all N parts of one split. The merged run is an ordinary pytest-benchmark run
JSON: the store, the gate and ``perfgate compare`` read it as any other. Each benchmark records
its part in ``extra_info`` (``worker`` or ``shard``) and the GPU it was timed on; the GPU is
trusted only when every part's was, and each untrusted reason names its part. The run's shard
and GPU stay where every part shares them (the workers of one shard: its shard).
"""

from __future__ import annotations

import copy

from perfgate.fields import Field, RunField
from perfgate.parts import check_split


class MergeError(ValueError):
    """Parts that cannot be one run; the message says which parts and why."""


def merge_runs(parts: dict[str, dict], kind: str = Field.WORKER) -> dict:
    """One run JSON from ``{part label: its run JSON}``, the parts in label order; ``kind``
    ("worker" or "shard") names a part in messages and in each benchmark's extra_info."""
    if not parts:
        raise MergeError(f"no {kind} wrote a run: nothing to merge")
    labels = sorted(parts)
    _same(
        parts,
        labels,
        kind,
        "hardware",
        lambda run: _perfgate(run).get(RunField.HARDWARE_KEY),
        "one key per run",
    )
    _same(
        parts,
        labels,
        kind,
        "commits",
        lambda run: (run.get("commit_info") or {}).get("id"),
        f"merge the {kind}s of one commit",
    )
    first = parts[labels[0]]
    merged = copy.deepcopy({k: v for k, v in first.items() if k != "benchmarks"})
    merged["datetime"] = min(str(parts[label].get("datetime") or "") for label in labels)
    merged["benchmarks"] = _benchmarks(parts, labels, kind)
    facts = merged.setdefault("machine_info", {}).setdefault(RunField.PERFGATE, {})
    for fact in (RunField.SHARD, RunField.GPU):  # kept where every part shares it (a shard
        values = [_perfgate(parts[label]).get(fact) for label in labels]  # timed under -n)
        if any(value != values[0] for value in values):
            facts.pop(fact, None)
    facts[RunField.GPU_HEALTH] = _health(parts, labels)
    facts[f"{kind}s"] = labels
    return merged


def merge_shards(runs: list[tuple[str, dict]]) -> dict:
    """One run from CI shard runs ``[(where, run JSON)]``: each must record its shard I/N, all of
    one N, every part from 1 to N exactly once."""
    labelled = []
    for where, run in runs:
        shard = _perfgate(run).get(RunField.SHARD)
        if not isinstance(shard, dict) or not {"index", "count"} <= set(shard):
            raise MergeError(f"{where} is not a shard run (no --perf-shard I/N recorded in it)")
        labelled.append((shard["index"], shard["count"], where, run))
    try:
        check_split(
            [(index, count, where) for index, count, where, _ in labelled],
            "give all {count} shard runs (a failed shard's job must be run again)",
        )
    except ValueError as error:
        raise MergeError(str(error)) from None
    parts = {f"{index}/{count}": run for index, count, _, run in labelled}
    return merge_runs(parts, Field.SHARD)


def _same(parts: dict[str, dict], labels: list[str], kind: str, what: str, fact, hint: str):
    values = {label: fact(parts[label]) for label in labels}
    if len(set(values.values())) > 1:
        listing = ", ".join(f"{label}: {value}" for label, value in values.items())
        raise MergeError(f"{kind}s ran on different {what} ({listing}); {hint}")


def _perfgate(run: dict) -> dict:
    return (run.get("machine_info") or {}).get(RunField.PERFGATE) or {}


def _benchmarks(parts: dict[str, dict], labels: list[str], kind: str) -> list[dict]:
    seen: dict[str, str] = {}
    benchmarks = []
    for label in labels:
        for entry in parts[label].get("benchmarks") or []:
            name = entry.get("fullname") or entry.get("name")
            if name in seen:
                raise MergeError(f"{name} was run by both {kind} {seen[name]} and {kind} {label}")
            seen[name] = label
            entry = copy.deepcopy(entry)
            entry.setdefault("extra_info", {})[kind] = label
            if gpu := _perfgate(parts[label]).get(RunField.GPU):
                entry["extra_info"][Field.GPU] = gpu
            benchmarks.append(entry)
    return benchmarks


def _health(parts: dict[str, dict], labels: list[str]) -> dict:
    per_part = {label: _perfgate(parts[label]).get(RunField.GPU_HEALTH) or {} for label in labels}
    reasons = [
        f"{label}: {reason}"
        for label, health in per_part.items()
        if not health.get("trusted", True)
        for reason in health.get("untrusted_reasons") or ["GPU health not trusted"]
    ]
    merged = dict(per_part[labels[0]])
    merged.update(trusted=not reasons, untrusted_reasons=reasons, per_part=per_part)
    return merged
