"""Instruction counts and exact counters: where they are stored, and the verdict on them.

A host-overhead case stores its counts in pytest-benchmark's JSON: per repeat, instructions per
call as samples in units of 1e-9 (1 instruction reads as 1 ns, so pytest-benchmark's tables stay
readable), and the exact figures in ``extra_info``: ``measure: "instructions"``,
``instructions`` (median per call), ``instructions_spread`` (max / min - 1 over repeats),
``counters`` (exact counts per call), ``top_functions`` ([name, self instructions per call]) and
``instructions_by_layout`` (each counting process's median; ``layout`` is the one kept).
The counted instructions leave out the C allocator (``uncounted`` says so; ``ALLOCATOR``).
"""

from __future__ import annotations

import platform
import re
import statistics
from numbers import Real

from perfgate.verdict.attribution import top_changes

SECONDS_PER_INSTRUCTION = 1e-9  # the nominal unit of the samples pytest-benchmark stores
DEFAULT_TOLERANCE = 0.01  # instructions per call may grow by 1 % before the gate fails
DIFF_ROWS = 10
STORED_FUNCTIONS = 100  # each side stores at least this many functions when it has them
# glibc's allocator (functions of its malloc.c): how many instructions a malloc or free takes
# depends on the heap's history, so the same case read up to 0.8 % apart after different
# earlier cases (a -k subset vs the whole session) and 0.5 % between sessions. The counted
# instructions leave it out; an added allocation still shows in its callers and in the ATen
# operator count (docs/gate-validation/instructions-session5/).
ALLOCATOR = "malloc.c:"
UNCOUNTED = "glibc malloc.c (the allocator's own instructions depend on the heap's history)"


def hardware_key() -> str:
    """The baseline folder of instruction counts: they depend on the instruction set PyTorch
    dispatches to (its CPU capability, ``counted_capability``), not on the CPU model or the
    number of cores."""
    return f"callgrind-{platform.machine()}-{counted_capability()}"


def counted_capability() -> str:
    """The CPU capability the counting process is told to use (``ATEN_CPU_CAPABILITY``):
    this machine's, but AVX2 in place of AVX-512, which valgrind does not execute (Inductor's
    C++ kernels built for AVX-512 die there with SIGILL), so a machine with AVX-512 counts the
    same code as one with AVX2, under the same key."""
    import torch  # here, so the gate and the command line can read counts without torch

    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX2" if capability == "AVX512" else capability


def record_instructions(benchmark, result: dict) -> None:
    """Store one case's counts (``callgrind.measure``'s entry) in pytest-benchmark's fixture."""
    from perfgate._pytest_benchmark import set_timer

    per_call = result["per_call"]
    readings = iter([r for count in per_call for r in (0.0, count * SECONDS_PER_INSTRUCTION)])

    def instructions_per_call() -> float:  # the timer: each round reads 0, then its count
        return next(readings)

    set_timer(benchmark, instructions_per_call)
    benchmark.pedantic(lambda: None, rounds=len(per_call), iterations=1, warmup_rounds=0)
    benchmark.extra_info.update(
        measure="instructions",
        instructions=round(statistics.median(per_call)),
        instructions_spread=max(per_call) / min(per_call) - 1,
        repeats=len(per_call),
        calls_per_repeat=result["calls"],
        counters=result["counters"],
        top_functions=result["top_functions"],
        uncounted=UNCOUNTED,
        allocator_instructions=round(result["allocator_per_call"]),
    )
    if "per_layout" in result:  # several counting processes: each one's count, and the one kept
        benchmark.extra_info["instructions_by_layout"] = [round(n) for n in result["per_layout"]]
        benchmark.extra_info["layout"] = result["layout"]
    if result.get("injected_instructions"):  # gate validation: the same case before injection
        benchmark.extra_info["injected_instructions"] = result["injected_instructions"]
        benchmark.extra_info["uninjected_per_call"] = result["uninjected_per_call"]


def is_instructions(extra_info: dict) -> bool:
    return extra_info.get("measure") == "instructions"


def _instructions(extra_info: dict, side: str) -> int:
    value = extra_info.get("instructions")
    if isinstance(value, bool) or not isinstance(value, Real) or value <= 0:
        raise ValueError(f"{side} instructions must be a positive number, got {value!r}")
    return value


def counter_findings(
    baseline_extra: dict, current_extra: dict, tolerance: float = DEFAULT_TOLERANCE
) -> tuple[list[str], list[str]]:
    """(regressions, improvements) of a case's counts against its baseline.

    Instructions per call more than ``tolerance`` (a fraction) above the baseline are a
    regression, more than ``tolerance`` below an improvement. Exact counters present on both
    sides have no tolerance: any increase is a regression, any decrease an improvement.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, Real) or not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1) (0.01 = 1 %), got {tolerance!r}")
    regressions: list[str] = []
    improvements: list[str] = []
    before = _instructions(baseline_extra, "baseline")
    now = _instructions(current_extra, "current")
    change = now / before - 1
    described = f"instructions per call {now:,} vs baseline {before:,} ({change:+.2%}"
    if change > tolerance:
        regressions.append(f"{described}, tolerance {tolerance:.2%})")
    elif change < -tolerance:
        improvements.append(f"{described})")
    more, fewer = exact_findings(baseline_extra.get("counters"), current_extra.get("counters"))
    return regressions + more, improvements + fewer


def exact_findings(old: dict | None, new: dict | None) -> tuple[list[str], list[str]]:
    """(regressions, improvements) of the exact counters present on both sides: no tolerance,
    any increase is a regression, any decrease an improvement."""
    old, new = old or {}, new or {}
    regressions: list[str] = []
    improvements: list[str] = []
    for name in sorted(set(old) & set(new)):
        described = f"{name} {new[name]} vs baseline {old[name]} (exact"
        if new[name] > old[name]:
            regressions.append(f"{described}: any increase fails)")
        elif new[name] < old[name]:
            improvements.append(f"{described})")
    return regressions, improvements


def stable_name(function: str) -> str:
    """A function's name as it reads in every process: JIT-generated code (oneDNN, MKL) has no
    symbol, only an address that changes from run to run, and callgrind's recursion suffix
    (``_PyEval_EvalFrameDefault'2``) changes with the call depth a wrapper adds."""
    if re.match(r"^\?\?\?:0x[0-9a-f]+ \[\?\?\?\]$", function):
        return "???:<JIT-generated code> [???]"
    return re.sub(r"'\d+(?= \[|$)", "", function)


def _stable_counts(extra_info: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, count in extra_info.get("top_functions") or []:
        counts[stable_name(name)] = counts.get(stable_name(name), 0) + count
    return counts


def function_diff(baseline_extra: dict, current_extra: dict, top: int = DIFF_ROWS) -> list[str]:
    """The ``top`` functions whose self instructions per call changed most, baseline vs now,
    outside the allocator (not counted; one line gives its totals)."""
    stored = [_stable_counts(side) for side in (baseline_extra, current_extra)]
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
    old, new = (side.get("allocator_instructions") for side in (baseline_extra, current_extra))
    if old is not None and new is not None:
        lines.append(f"not counted: the allocator (glibc malloc.c) {old:,} -> {new:,} per call")
    return lines


def counted_alike(baseline_extra: dict, current_extra: dict) -> str | None:
    """Why two cases' instruction counts cannot be compared (counted another way), or None."""
    old, new = baseline_extra.get("uncounted"), current_extra.get("uncounted")
    if old == new:
        return None
    return (
        f"not gated: the baseline counted instructions another way (left out: {old or 'nothing'};"
        f" now: {new or 'nothing'}): record a new baseline with --benchmark-save"
    )
