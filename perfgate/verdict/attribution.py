"""Where a confirmed regression comes from: the parts of a case that changed most, baseline vs
now. For a timed case the parts are its kernels (device time per call on CUDA, operator CPU time
on the CPU; Python functions' self time where a plain benchmark call ran no PyTorch operator)
and the operators that allocated memory, from the profiles stored with each side
(``session.reruns.store_profiles``); for an instruction count they are functions
(``function_diff``). Pure data in, lines out: the gate and ``perfgate compare`` print
them under the verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from perfgate.fields import ALLOCATOR, PROFILE_ROWS, STORED_FUNCTIONS, Profile, StoredFields

ROWS = 10  # parts shown: kernels, allocation sites, functions

PARTS = {  # what a profile lists: key, heading, how one value is written
    "time": (Profile.TIME_US, "{parts} by change in {clock} time per call", "{:,.1f} us"),
    "memory": (Profile.ALLOCATED_BYTES, "allocations by change in bytes per call", "{:,.0f} B"),
}


def top_changes(
    before: dict[str, float],
    now: dict[str, float],
    top: int,
    write: Callable[[float], str],
    cut: tuple[bool, bool] = (False, False),
) -> list[str]:
    """One line per part whose value changed, the largest change first, at most ``top``.

    Each side stores its largest parts. ``cut`` says, for (before, now), whether that side's
    list was cut short: then a part missing there may still be there, below the smallest stored
    value, and its change is only known to be at least the distance to that value ("or more";
    none when it may be no change at all). A part missing from a complete list is 0 there.
    """
    floors = [
        min(side.values()) if cut_here and side else 0
        for side, cut_here in zip((before, now), cut, strict=True)
    ]

    def change(name: str) -> tuple[float, bool]:
        if name in before and name in now:
            return now[name] - before[name], False
        if name in now:
            return now[name] - min(now[name], floors[0]), floors[0] > 0
        return min(before[name], floors[1]) - before[name], floors[1] > 0

    shown_zero = write(0)  # a change too small to show at the written precision is no change
    changes = {name: change(name) for name in set(before) | set(now)}
    changed = [(n, d, bound) for n, (d, bound) in changes.items() if write(abs(d)) != shown_zero]
    changed.sort(key=lambda item: (-abs(item[1]), item[0]))

    def shown(values: dict, floor: float, name: str) -> str:
        if name in values:
            return write(values[name])
        return f"not in top (at most {write(floor)})" if floor else "not in top"

    sign = {True: "+", False: "-"}
    return [
        f"{sign[delta > 0]}{write(abs(delta))}{' or more' if bound else ''} {name} "
        f"(baseline {shown(before, floors[0], name)} -> now {shown(now, floors[1], name)})"
        for name, delta, bound in changed[:top]
    ]


def profile_diff(baseline: dict | None, current: dict | None, part: str) -> list[str]:
    """Lines comparing the stored profiles of a case (``part``: "time" or "memory"); none for a
    case that has no profile on either side (a case never profiled: counted, or timed in rounds)."""
    if not baseline and not current:
        return []
    if not baseline:
        return [
            "no profile stored with the baseline, so no kernel diff: runs saved with "
            "--benchmark-save store one (--perf-store-profiles)"
        ]
    if not current:
        return ["no profile of the current run (the gate profiles what it confirmed)"]
    if baseline.get(Profile.CLOCK) != current.get(Profile.CLOCK):
        clocks = f"baseline {baseline.get(Profile.CLOCK)}, now {current.get(Profile.CLOCK)}"
        return [f"profiles of other clocks, not compared: {clocks}"]
    key, heading, form = PARTS[part]
    before, now = dict(baseline.get(key) or []), dict(current.get(key) or [])
    cut = (len(before) >= PROFILE_ROWS, len(now) >= PROFILE_ROWS)
    lines = top_changes(before, now, ROWS, form.format, cut)
    clock = current[Profile.CLOCK]
    parts = "functions" if clock == Profile.PYTHON else "kernels"
    heading = heading.format(clock=clock, parts=parts)
    if not lines:
        return [f"{heading}: no change in the stored profiles"]
    return [f"top {len(lines)} {heading}:", *lines]


def function_diff(baseline: StoredFields, current: StoredFields, top: int = ROWS) -> list[str]:
    """The ``top`` functions whose self instructions per call changed most, baseline vs now
    (two counted ``Benchmark``), outside the allocator (not counted; one line gives its totals)."""
    stored = [side.top_functions for side in (baseline, current)]
    # a list of STORED_FUNCTIONS or more was cut: smaller functions are not stored on that side
    cut = (len(stored[0]) >= STORED_FUNCTIONS, len(stored[1]) >= STORED_FUNCTIONS)
    before, now = (
        {name: n for name, n in side.items() if not name.startswith(ALLOCATOR)} for side in stored
    )
    lines = top_changes(before, now, top, "{:,}".format, cut)
    if lines:
        lines.insert(0, f"top {len(lines)} functions by change in self instructions per call:")
    else:
        lines = ["no change in the stored per-function counts"]
    old, new = (side.allocator_instructions for side in (baseline, current))
    if old is not None and new is not None:
        lines.append(f"not counted: the allocator (glibc malloc.c) {old:,} -> {new:,} per call")
    return lines
