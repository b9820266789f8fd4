"""Instruction counts of benchmarked calls, measured by callgrind: the parent's side.

``measure`` starts ``valgrind --tool=callgrind`` with instrumentation off, running
``perfgate.measure.callgrind_child`` (pytest on the selected tests), in a few processes at once,
each with another heap layout; each counts every test's ``benchmark(...)`` call
(``callgrind_child.Counter``) into dumps of its own. The parent reads every dump with
``callgrind_annotate`` and keeps per test the layout with the fewest instructions.

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
from pathlib import Path

from perfgate.fields import ALLOCATOR, COUNTING_SPEC, STORED_FUNCTIONS, stable_name
from perfgate.measure.callgrind_process import (
    environment,
    no_address_randomization,
    python_in,
    scratch_parent,
)
from perfgate.measure.callgrind_requests import LIBRARY_NAME

TOOLS = ("valgrind", "callgrind_annotate")
LAYOUT_VARIABLE = "PERFGATE_CALLGRIND_LAYOUT"  # which heap layout a counting process takes
SPEC_FILE, RESULTS_FILE = "spec.json", "results.json"  # in the counting process's folder
# Functions kept per case for the diff, by self instructions per call: the 100 largest, and any
# other with at least 0.1 % of the case (up to 400), so that work worth a share the gate can see
# is named even in a small case, whose 100th function may be far below it.
LISTED_SHARE = 0.001
MAX_FUNCTIONS = 400
NAME_LENGTH = 160  # function names are cut here (C++ template names run to kilobytes)
# pytest's exit statuses after which the counting process's results stand: all passed, or some
# failed (each test's outcome is in the results)
FINISHED = (0, 1)


class CallgrindError(Exception):
    """The callgrind run failed; the message says why and where the log is."""


def missing_tools() -> list[str]:
    """The valgrind programs this machine lacks (empty when all are installed)."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


# --- the parent: start valgrind, read the dumps ------------------------------------------------
def measure(spec: dict, root: Path, log: Path, library: Path, layouts: int = 1) -> dict[str, dict]:
    """Count the tests of ``spec`` (``nodeids``, pytest's ``args``, ``repeats``, and the
    ``environment`` variables given beside the built environment) in ``layouts``
    callgrind processes at once, each with another heap layout (``shift_layout``), and keep
    per test the process that counted the fewest instructions per call.

    A layout can only add work (unlucky collisions in CPython's method cache and dictionaries:
    ``docs/gate-validation/instructions-session6/``; the small-object allocator's pools put a
    loop of Python integers in one of three regimes, 1.85, 1.87 or 1.90 M instructions a call),
    so the fewest over several layouts is the count that does not depend on the one a session
    happens to get.

    Returns per test id either its ``outcome`` and ``message`` (failed, skipped, not collected,
    no benchmark call) or its counts: ``per_call`` (instructions per call of each repeat,
    outside the allocator), ``allocator_per_call`` (the allocator's, not gated),
    ``top_functions`` ([name, self instructions per call] of the median repeat), ``counters``,
    ``calls``, the test's ``group`` and ``extra_info``, and ``layout`` (the process kept) with
    ``per_layout`` (each process's median per call). ``log`` receives the first process's
    output, ``LOG-layoutN`` the others'; ``root`` goes on PYTHONPATH; ``library`` is
    ``callgrind_requests.build()``'s.
    """
    with contextlib.ExitStack() as stack:
        folders = [
            Path(
                stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="perfgate-callgrind-", dir=scratch_parent())
                )
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
                processes.append(_start(spec, root, scratch, path, layout, library))
            counted = [
                _finish(process, s, path)
                for process, s, path in zip(processes, folders, logs, strict=True)
            ]
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        per_layout = [
            {name: _summarize(entry, scratch) for name, entry in raw.items()}
            for raw, scratch in zip(counted, folders, strict=True)
        ]
        return {name: _fewest([each[name] for each in per_layout]) for name in spec["nodeids"]}


def _start(
    spec: dict, root: Path, scratch: Path, log: Path, layout: int, library: Path
) -> subprocess.Popen:
    spec_path = scratch / SPEC_FILE
    spec_path.write_text(json.dumps({**spec, "out": str(scratch)}))
    shutil.copyfile(library, scratch / LIBRARY_NAME)
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
    env = {**environment(root, scratch), **spec.get("environment", {})}
    env[LAYOUT_VARIABLE] = str(layout)
    env[COUNTING_SPEC] = str(spec_path)
    with open(log, "w", encoding="utf-8") as output:  # the child keeps its own handle
        return subprocess.Popen(command, env=env, cwd=scratch, stdout=output, stderr=output)


VALGRIND_LINE = re.compile(r"==\d+==")


def _finish(process: subprocess.Popen, scratch: Path, log: Path) -> dict:
    """The results of a counting process, once it ends; CallgrindError if it failed."""
    returncode = process.wait()
    results = scratch / RESULTS_FILE
    if returncode not in FINISHED or not results.exists():
        raise CallgrindError(
            f"the callgrind run failed (exit {returncode}): {_last_line(log)}; full log in {log}"
        )
    return json.loads(results.read_text())


def _fewest(summaries: list[dict]) -> dict:
    """The summary of the layout with the fewest instructions per call (median of repeats);
    the first layout's outcome where a layout counted nothing."""
    if any("per_call" not in summary for summary in summaries):
        return next(summary for summary in summaries if "per_call" not in summary)
    medians = [statistics.median(summary["per_call"]) for summary in summaries]
    layout = medians.index(min(medians))
    return {**summaries[layout], "layout": layout, "per_layout": medians}


def _last_line(log: Path) -> str:
    """The log's last line of the process itself: valgrind's own lines (``==PID== ...``, its
    summary after the error) say nothing of why."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    own = [line for line in lines if line and not VALGRIND_LINE.match(line)]
    return own[-1] if own else "no output"


def _summarize(raw: dict, scratch: Path) -> dict:
    if "dumps" not in raw:  # failed, skipped, not collected: the outcome as the child saw it
        return raw
    calls = raw["calls"]
    per_call, allocator, functions = [], [], []
    for dump in raw["dumps"]:
        total, counts = annotate(scratch / f"callgrind.out.{dump}")
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
        "group": raw.get("group"),
        "extra_info": raw.get("extra_info", {}),
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
