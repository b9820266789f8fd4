"""Where a confirmed regression comes from: the parts of a case that changed most, baseline vs
now. For a timed case the parts are its kernels (device time per call on CUDA, operator CPU time
on the CPU) and the operators that allocated memory, from the profiles stored with each side
(``profiling.ProfileStore``); for an instruction count they are functions
(``counters.function_diff``). Pure data in, lines out: the gate and ``perfgate compare`` print
them under the verdict.
"""

from __future__ import annotations

from collections.abc import Callable

ROWS = 10

PARTS = {  # what a profile lists: key, heading, how one value is written
    "time": ("time_us", "kernels by change in {clock} time per call", "{:,.1f} us"),
    "memory": ("allocated_bytes", "allocations by change in bytes per call", "{:,.0f} B"),
}


def top_changes(
    before: dict[str, float], now: dict[str, float], top: int, write: Callable[[float], str]
) -> list[str]:
    """One line per part whose value changed, the largest change first, at most ``top``.

    Each side stores only its largest parts; one missing on a side counts as 0 there and is
    shown as "not in top" (its true value is at most that side's smallest stored one).
    """
    deltas = {name: now.get(name, 0) - before.get(name, 0) for name in set(before) | set(now)}
    shown_zero = write(0)  # a change too small to show at the written precision is no change
    changed = [d for d in deltas.items() if write(abs(d[1])) != shown_zero]
    changed.sort(key=lambda d: (-abs(d[1]), d[0]))

    def shown(values: dict, name: str) -> str:
        return write(values[name]) if name in values else "not in top"

    sign = {True: "+", False: "-"}
    return [
        f"{sign[delta > 0]}{write(abs(delta))} {name} "
        f"(baseline {shown(before, name)} -> now {shown(now, name)})"
        for name, delta in changed[:top]
    ]


def profile_diff(baseline: dict | None, current: dict | None, part: str) -> list[str]:
    """Lines comparing the stored profiles of a case (``part``: "time" or "memory")."""
    if not baseline:
        return [
            "no profile stored with the baseline, so no kernel diff: runs saved with "
            "--benchmark-save store one (--perf-store-profiles)"
        ]
    if not current:
        return ["no profile of the current run (the gate profiles what it confirmed)"]
    if baseline.get("clock") != current.get("clock"):
        clocks = f"baseline {baseline.get('clock')}, now {current.get('clock')}"
        return [f"profiles of other clocks, not compared: {clocks}"]
    key, heading, form = PARTS[part]
    before, now = dict(baseline.get(key) or []), dict(current.get(key) or [])
    lines = top_changes(before, now, ROWS, form.format)
    heading = heading.format(clock=current["clock"])
    if not lines:
        return [f"{heading}: no change in the stored profiles"]
    return [f"top {len(lines)} {heading}:", *lines]
