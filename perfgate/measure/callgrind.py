"""Instruction counts of host-overhead cases, measured by callgrind.

The parent (``measure``) starts ``valgrind --tool=callgrind`` with instrumentation off, running
``perfgate.measure.callgrind_child`` as a script, in a few processes at once, each with another heap
layout; each builds every case (compiling included) at near native speed, switches
instrumentation on with ``callgrind_control``, runs one uncounted warm-up repeat and
``repeats`` counted repeats of ``calls`` calls, each dumped to its own file by
``torch._C._valgrind_toggle_and_dump_stats``, switches it off again and counts the exact
counters (ATen operators, Python calls, Dynamo graphs). The parent reads every dump with
``callgrind_annotate`` and keeps per case the layout with the fewest instructions.

``PERFGATE_INJECT_INSTRUCTIONS`` (gate validation, ``perfgate/measure/callgrind_inject.py``) adds a
known share of instructions to every call.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfgate.fields import ALLOCATOR, STORED_FUNCTIONS, stable_name
from perfgate.measure.callgrind_process import (
    environment,
    no_address_randomization,
    python_in,
    scratch_parent,
)

TOOLS = ("valgrind", "callgrind_annotate", "callgrind_control")
LAYOUT_VARIABLE = "PERFGATE_CALLGRIND_LAYOUT"  # which heap layout a counting process takes
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
def measure(
    module: str, cases: list[str], repeats: int, root: Path, log: Path, layouts: int = 1
) -> dict[str, dict]:
    """Count every case of ``module.HOST_CASES`` named in ``cases`` in ``layouts`` callgrind
    processes at once, each with another heap layout (``shift_layout``), and keep per case the
    process that counted the fewest instructions per call.

    A layout can only add work (unlucky collisions in CPython's method cache and dictionaries:
    ``docs/gate-validation/instructions-session6/``), so the fewest over several layouts is the
    count that does not depend on the one a session happens to get.

    Returns per case: ``per_call`` (instructions per call of each repeat, outside the allocator),
    ``allocator_per_call`` (the allocator's, not gated), ``top_functions`` ([name, self
    instructions per call] of the median repeat), ``counters``, ``calls``, and ``layout`` (the
    process kept) with ``per_layout`` (each process's median per call). ``log`` receives the
    first process's valgrind output, ``LOG-layoutN`` the others'; ``root`` goes on PYTHONPATH.
    """
    with contextlib.ExitStack() as stack:
        folders = [
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="perfgate-callgrind-", dir=scratch_parent())
            )
            for _ in range(layouts)
        ]
        logs = [log] + [
            log.with_name(f"{log.stem}-layout{n}{log.suffix}") for n in range(1, layouts)
        ]
        log.parent.mkdir(parents=True, exist_ok=True)
        processes = []
        try:
            for layout, (scratch, path) in enumerate(zip(folders, logs, strict=True)):
                spec = {"module": module, "cases": cases, "repeats": repeats, "out": scratch}
                processes.append(_start(spec, root, Path(scratch), path, layout))
            counted = [
                _finish(process, Path(s), path)
                for process, s, path in zip(processes, folders, logs, strict=True)
            ]
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        per_layout = [
            {name: _summarize(raw[name], scratch) for name in cases}
            for raw, scratch in zip(counted, folders, strict=True)
        ]
        return {name: _fewest([each[name] for each in per_layout]) for name in cases}


def _start(spec: dict, root: Path, scratch: Path, log: Path, layout: int) -> subprocess.Popen:
    spec_path = scratch / "spec.json"
    spec_path.write_text(json.dumps(spec))
    command = [
        *no_address_randomization(),
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        f"--callgrind-out-file={scratch}/callgrind.out",
        python_in(scratch),
        "-m",
        "perfgate.measure.callgrind_child",
        str(spec_path),
    ]
    env = {**environment(root, scratch), LAYOUT_VARIABLE: str(layout)}
    with open(log, "w", encoding="utf-8") as output:  # the child keeps its own handle
        return subprocess.Popen(command, env=env, cwd=scratch, stdout=output, stderr=output)


def _finish(process: subprocess.Popen, scratch: Path, log: Path) -> dict:
    """The results of a counting process, once it ends; CallgrindError if it failed."""
    returncode = process.wait()
    results = scratch / "results.json"
    if returncode != 0 or not results.exists():
        raise CallgrindError(
            f"the callgrind run failed (exit {returncode}): {_last_line(log)}; full log in {log}"
        )
    return json.loads(results.read_text())


def _fewest(summaries: list[dict]) -> dict:
    """The summary of the layout with the fewest instructions per call (median of repeats)."""
    medians = [statistics.median(summary["per_call"]) for summary in summaries]
    layout = medians.index(min(medians))
    return {**summaries[layout], "layout": layout, "per_layout": medians}


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
