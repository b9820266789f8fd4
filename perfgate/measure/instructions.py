"""Instruction counts and exact counters: how they are stored (the verdict on them is
``verdict.rules``: ``InstructionCount`` and ``ExactCounters``).

A counted case stores its counts in pytest-benchmark's JSON: per repeat, instructions per
call as samples in units of 1e-9 (1 instruction reads as 1 ns, so pytest-benchmark's tables stay
readable), and the exact figures in ``extra_info``: ``measure: "instructions"``,
``instructions`` (median per call), ``instructions_spread`` (max / min - 1 over repeats),
``counters`` (exact counts per call), ``top_functions`` ([name, self instructions per call]) and
``instructions_by_layout`` (each counting process's median; ``layout`` is the one kept).
The counted instructions leave out the C allocator (``uncounted`` says so; ``fields.ALLOCATOR``).
"""

from __future__ import annotations

import importlib.util
import platform
import statistics
from pathlib import Path

from perfgate.fields import Field

SECONDS_PER_INSTRUCTION = 1e-9  # the nominal unit of the samples pytest-benchmark stores
# glibc's allocator (functions of its malloc.c): how many instructions a malloc or free takes
# depends on the heap's history, so the same case read up to 0.8 % apart after different
# earlier cases (a -k subset vs the whole session) and 0.5 % between sessions. The counted
# instructions leave it out; an added allocation still shows in its callers and in the ATen
# operator count (docs/gate-validation/instructions-session5/). fields.ALLOCATOR names it.
UNCOUNTED = "glibc malloc.c (the allocator's own instructions depend on the heap's history)"


def hardware_key() -> str:
    """The baseline folder of instruction counts: they depend on the instruction set PyTorch
    dispatches to (its CPU capability, ``counted_capability``), not on the CPU model or the
    number of cores."""
    return f"callgrind-{platform.machine()}-{counted_capability()}"


def counted_capability() -> str:
    """The CPU capability the counting process is told to use (``ATEN_CPU_CAPABILITY``):
    this machine's as PyTorch names it, but AVX2 in place of AVX-512, which valgrind does not
    execute (Inductor's C++ kernels built for AVX-512 die there with SIGILL), so a machine with
    AVX-512 counts the same code as one with AVX2, under the same key. Without torch (a
    pure-Python project), the same names from the CPU's flags: glibc's string functions and
    CPython's own code pick their variants by them too."""
    if importlib.util.find_spec("torch") is None:
        return _capability_from_flags()
    import torch  # here, so the gate and the command line can read counts without torch

    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX2" if capability == "AVX512" else capability


def _capability_from_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """AVX2 where the CPU has it (x86-64), else DEFAULT, as PyTorch would name them."""
    if platform.machine() not in ("x86_64", "AMD64") or not cpuinfo.exists():
        return "DEFAULT"
    lines = cpuinfo.read_text().splitlines()
    flags = next((line for line in lines if line.startswith("flags")), "")
    return "AVX2" if {"avx2", "fma"} <= set(flags.split()) else "DEFAULT"


def record_instructions(benchmark, result: dict) -> None:
    """Store one case's counts (``callgrind.measure``'s entry) in pytest-benchmark's fixture."""
    from perfgate._pytest_benchmark import set_timer

    per_call = result["per_call"]
    readings = iter([r for count in per_call for r in (0.0, count * SECONDS_PER_INSTRUCTION)])

    def instructions_per_call() -> float:  # the timer: each round reads 0, then its count
        return next(readings)

    set_timer(benchmark, instructions_per_call)
    benchmark.pedantic(lambda: None, rounds=len(per_call), iterations=1, warmup_rounds=0)
    info = benchmark.extra_info
    info[Field.MEASURE] = Field.INSTRUCTIONS
    info[Field.INSTRUCTIONS] = round(statistics.median(per_call))
    info[Field.INSTRUCTIONS_SPREAD] = max(per_call) / min(per_call) - 1
    info[Field.REPEATS], info[Field.CALLS_PER_REPEAT] = len(per_call), result["calls"]
    info[Field.COUNTERS], info[Field.TOP_FUNCTIONS] = result["counters"], result["top_functions"]
    info[Field.UNCOUNTED] = UNCOUNTED
    info[Field.ALLOCATOR_INSTRUCTIONS] = round(result["allocator_per_call"])
    if "per_layout" in result:  # several counting processes: each one's count, and the one kept
        info[Field.INSTRUCTIONS_BY_LAYOUT] = [round(n) for n in result["per_layout"]]
        info[Field.LAYOUT] = result["layout"]
    if result.get("injected_instructions"):  # gate validation: the same case before injection
        info[Field.INJECTED_INSTRUCTIONS] = result["injected_instructions"]
        info[Field.UNINJECTED_PER_CALL] = result["uninjected_per_call"]
