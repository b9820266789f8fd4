"""A run's environment: what can change performance without changing hardware (software
versions, the GPU driver, the host allocator, locked clocks), and how two environments differ."""

from __future__ import annotations

from perfgate.fields import RunField


def environment(machine_info: dict) -> dict:
    """Software versions (python, torch, cuda, cudnn, triton), the GPU driver, the host
    allocator setting and locked GPU clocks of a run: what can change performance without
    changing hardware."""
    perfgate = machine_info.get(RunField.PERFGATE) or {}
    facts = dict(perfgate.get(RunField.SOFTWARE) or {})
    if RunField.HOST_MALLOC in perfgate:
        facts["host malloc"] = perfgate[RunField.HOST_MALLOC]
    if perfgate.get(RunField.CLOCKS_LOCKED):  # only when locked: older runs did not record it
        facts["GPU clocks"] = "locked at base"
    driver = (perfgate.get(RunField.GPU_HEALTH) or {}).get("driver_version")
    if driver:
        facts["driver"] = driver
    return facts


def environment_changes(before: dict, after: dict) -> list[tuple[str, str, str]]:
    """(key, before, after) for each environment entry that differs, sorted by key; none when
    a run recorded no environment (saved by pytest-benchmark alone: unknown, not changed)."""
    if not before or not after:
        return []
    keys = sorted(set(before) | set(after))
    return [
        (k, str(before.get(k)), str(after.get(k))) for k in keys if before.get(k) != after.get(k)
    ]


def describe_changes(changes: list[tuple[str, str, str]]) -> str:
    return "; ".join(f"{key} {old} -> {new}" for key, old, new in changes)
