"""Instruction counts of host-overhead cases, all measured in one callgrind process.

The parent (``measure``) starts ``valgrind --tool=callgrind`` with instrumentation off, running
this module as a script (``main``). The script builds each case (compiling included) at near
native speed, switches instrumentation on with ``callgrind_control``, runs one uncounted warm-up
repeat and ``repeats`` counted repeats of ``calls`` calls, each dumped to its own file by
``torch._C._valgrind_toggle_and_dump_stats``, switches it off again and counts the exact
counters (ATen operators, Python calls, Dynamo graphs). The parent then reads every dump with
``callgrind_annotate``.

``PERFGATE_INJECT_INSTRUCTIONS`` (gate validation, ``perfgate/callgrind_inject.py``) adds a
known share of instructions to every call.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfgate.callgrind_inject import crc32_cost, inject_fraction, injection
from perfgate.callgrind_process import (
    environment,
    no_address_randomization,
    python_in,
    scratch_parent,
)
from perfgate.counters import ALLOCATOR, STORED_FUNCTIONS, stable_name

TOOLS = ("valgrind", "callgrind_annotate", "callgrind_control")
# Functions kept per case for the diff, by self instructions per call: the 100 largest, and any
# other with at least 0.1 % of the case (up to 400), so that work worth a share the gate can see
# is named even in a small case, whose 100th function may be far below it.
LISTED_SHARE = 0.001
MAX_FUNCTIONS = 400
NAME_LENGTH = 160  # function names are cut here (C++ template names run to kilobytes)


@dataclass(frozen=True)
class HostCase:
    """One case: ``build()`` makes the zero-argument callable to count (setup and compile happen
    there, uncounted); ``calls`` calls make one repeat."""

    build: Callable[[], Callable[[], object]]
    calls: int
    # A TorchDispatchMode makes a compiled model run its frame eagerly: the count would be eager's
    count_aten_ops: bool = True


class CallgrindError(Exception):
    """The callgrind run failed; the message says why and where the log is."""


def missing_tools() -> list[str]:
    """The valgrind programs this machine lacks (empty when all are installed)."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


# --- the parent: start valgrind, read the dumps ------------------------------------------------
def measure(module: str, cases: list[str], repeats: int, root: Path, log: Path) -> dict[str, dict]:
    """Count every case of ``module.HOST_CASES`` named in ``cases`` in one callgrind process.

    Returns per case: ``per_call`` (instructions per call of each repeat, outside the allocator),
    ``allocator_per_call`` (the allocator's, not gated), ``top_functions`` ([name, self
    instructions per call] of the median repeat), ``counters`` and ``calls``.
    ``log`` receives valgrind's output; ``root`` goes on PYTHONPATH.
    """
    with tempfile.TemporaryDirectory(prefix="perfgate-callgrind-", dir=scratch_parent()) as scratch:
        spec = {"module": module, "cases": cases, "repeats": repeats, "out": scratch}
        spec_path = Path(scratch, "spec.json")
        spec_path.write_text(json.dumps(spec))
        command = [
            *no_address_randomization(),
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--callgrind-out-file={scratch}/callgrind.out",
            python_in(Path(scratch)),
            "-m",
            "perfgate.callgrind",
            str(spec_path),
        ]
        env = environment(root, Path(scratch))
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as output:
            done = subprocess.run(command, env=env, cwd=scratch, stdout=output, stderr=output)
        results_path = Path(scratch, "results.json")
        if done.returncode != 0 or not results_path.exists():
            raise CallgrindError(
                f"the callgrind run failed (exit {done.returncode}): {_last_line(log)}; "
                f"full log in {log}"
            )
        raw = json.loads(results_path.read_text())
        return {name: _summarize(raw[name], scratch) for name in cases}


def _last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _summarize(raw: dict, scratch: str) -> dict:
    calls = raw["calls"]
    per_call, allocator, functions = [], [], []
    for dump in raw["dumps"]:
        total, counts = annotate(Path(scratch, f"callgrind.out.{dump}"))
        per_call.append(counted(total, counts) / calls)
        allocator.append((total - counted(total, counts)) / calls)
        functions.append(counts)
    median_repeat = per_call.index(statistics.median_low(per_call))
    top = listed_functions(functions[median_repeat], per_call[median_repeat] * calls)
    return {
        "per_call": per_call,
        "allocator_per_call": statistics.median(allocator),
        "calls": calls,
        "top_functions": [[name, round(count / calls)] for name, count in top],
        "counters": raw["counters"],
        "injected_instructions": raw.get("injected_instructions", 0),
        "uninjected_per_call": raw.get("uninjected_per_call", []),
    }


_TOTAL = re.compile(r"^\s*([0-9,]+)\s+PROGRAM TOTALS")
_FUNCTION = re.compile(r"^\s*([0-9,]+)\s+(\S.*:.+)$")


def annotate(dump: Path) -> tuple[int, dict[str, int]]:
    """(total instructions, {function: self instructions}) of one dump, by callgrind_annotate."""
    output = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--show-percs=no", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total, counts, in_table = None, {}, False
    for line in output.splitlines():
        if total is None:
            if match := _TOTAL.match(line):
                total = int(match.group(1).replace(",", ""))
        elif line.startswith("Ir") and "file:function" in line:
            in_table = True
        elif in_table and (match := _FUNCTION.match(line)):
            name = short_name(match.group(2))
            counts[name] = counts.get(name, 0) + int(match.group(1).replace(",", ""))
    if total is None:
        raise CallgrindError(f"callgrind_annotate printed no PROGRAM TOTALS for {dump}")
    return total, counts


def listed_functions(counts: dict[str, int], counted_total: float) -> list[tuple[str, int]]:
    """The functions stored for the diff, largest first (STORED_FUNCTIONS, LISTED_SHARE)."""
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return [
        item
        for rank, item in enumerate(ranked[:MAX_FUNCTIONS])
        if rank < STORED_FUNCTIONS or item[1] >= LISTED_SHARE * counted_total
    ]


def counted(total: int, counts: dict[str, int]) -> int:
    """The instructions the gate counts: all of them but the allocator's (ALLOCATOR)."""
    return total - sum(count for name, count in counts.items() if name.startswith(ALLOCATOR))


def short_name(function: str) -> str:
    """A function name without build paths: the library by file name, source files from their
    project folder (``Python/ceval.c``), cut at NAME_LENGTH characters."""
    function = re.sub(r"\s\[(?:[^\]]*/)?([^\]/]+)\]$", r" [\1]", function)
    function = re.sub(r"^.*/(Python|Objects|Modules|Include)/", r"\1/", function)
    function = re.sub(r"^\./[^:]*/", "", function)  # glibc's ./malloc/./malloc/malloc.c
    return stable_name(function[:NAME_LENGTH])


# --- the script inside valgrind ----------------------------------------------------------------
def set_instrumentation(on: bool) -> None:
    """Switch callgrind's instrumentation for this process; spins while waiting, because
    callgrind only reads commands while the program runs."""
    command = ["callgrind_control", "--instr=" + ("on" if on else "off"), str(os.getpid())]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while process.poll() is None:
        sum(range(1000))
    output = process.stdout.read().decode(errors="replace")
    if process.returncode != 0 or "OK" not in output:
        raise CallgrindError(f"callgrind_control failed: {output.strip()}")


class _Dumps:
    """Counts the dumps callgrind writes (callgrind.out.1, .2, ...) in this process."""

    def __init__(self, folder: str):
        self.folder = folder
        self.written = 0

    def count(self, calls: Callable[[], None]) -> int:
        """Run ``calls`` with collection on and dump; the dump's number."""
        import torch

        gc.collect()
        gc.disable()
        torch._C._valgrind_toggle()
        calls()
        torch._C._valgrind_toggle_and_dump_stats()
        gc.enable()
        self.written += 1
        return self.written

    def per_call(self, number: int, calls: int) -> float:
        return counted(*annotate(Path(self.folder, f"callgrind.out.{number}"))) / calls


def _loop(fn: Callable[[], object], calls: int, extra: Callable[[], object] | None):
    """``calls`` calls of ``fn``, each followed by ``extra`` when one is given."""

    def plain() -> None:
        for _ in range(calls):
            fn()

    def injected() -> None:
        for _ in range(calls):
            fn()
            extra()

    return plain if extra is None else injected


def measure_case(case: HostCase, repeats: int, dumps: _Dumps, inject: float, cost) -> dict:
    """Build, warm up and count one case (instrumentation must be off on entry and on exit)."""
    import torch

    from perfgate.exact_counters import exact_counters

    torch.manual_seed(0)
    torch._dynamo.utils.counters.clear()
    fn = case.build()
    fn()
    graphs_after_first_call = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    set_instrumentation(True)
    # The first dump after instrumentation comes on carries callgrind's bookkeeping of the
    # switch (a wrapped, huge count), and the new code's translations are made here: discarded.
    dumps.count(_loop(fn, case.calls, None))
    numbers = [dumps.count(_loop(fn, case.calls, None)) for _ in range(repeats)]
    extra, injected, uninjected = None, 0, []
    if inject:
        uninjected = [dumps.per_call(n, case.calls) for n in numbers]
        own = statistics.median(uninjected)
        extra, expected = injection(cost, inject * own)
        # a call costs less after fn() in one loop than alone in its own: size it in place
        added = dumps.per_call(dumps.count(_loop(fn, case.calls, extra)), case.calls) - own
        extra, injected = injection((cost[0] + added - expected, cost[1]), inject * own)
        numbers = [dumps.count(_loop(fn, case.calls, extra)) for _ in range(repeats)]
    set_instrumentation(False)
    counters = exact_counters(fn, extra, case.calls, graphs_after_first_call, case.count_aten_ops)
    return {
        "dumps": numbers,
        "calls": case.calls,
        "counters": counters,
        "injected_instructions": injected,
        "uninjected_per_call": uninjected,
    }


def main(spec_path: str) -> int:
    start = time.perf_counter()
    import torch

    print(f"perfgate callgrind: torch imported in {time.perf_counter() - start:.0f} s", flush=True)
    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(1)
    cases = importlib.import_module(spec["module"]).HOST_CASES
    dumps, inject, cost = _Dumps(spec["out"]), inject_fraction(), None
    if inject:
        set_instrumentation(True)
        dumps.count(lambda: None)  # the dump after the switch is not a count (measure_case)
        cost = crc32_cost(lambda call: dumps.per_call(dumps.count(_loop(call, 20, None)), 20))
        set_instrumentation(False)
    results = {}
    with torch.inference_mode():
        for name in spec["cases"]:
            start = time.perf_counter()
            results[name] = measure_case(cases[name], spec["repeats"], dumps, inject, cost)
            print(f"perfgate callgrind: {name} in {time.perf_counter() - start:.0f} s", flush=True)
    Path(spec["out"], "results.json").write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
