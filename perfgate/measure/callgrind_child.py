"""The script that ``measure.callgrind.measure`` runs inside valgrind: it builds each case at near
native speed with instrumentation off, switches it on for an uncounted warm-up repeat and the
counted repeats (each dumped to its own file), switches it off and counts the exact counters."""

from __future__ import annotations

import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from perfgate.measure.callgrind import LAYOUT_VARIABLE, CallgrindError, HostCase, annotate, counted
from perfgate.measure.callgrind_inject import crc32_cost, inject_fraction, injection


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

    from perfgate.measure.exact_counters import exact_counters

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


# Layout N > 0 makes N * LAYOUT_CLASSES classes, each looked up once, before torch is imported:
# every later type gets another version tag and every later object another address, so the
# method cache's collisions fall elsewhere (its index mixes the two).
LAYOUT_CLASSES = 97


def shift_layout(layout: int) -> list[type]:
    """Classes that shift this process's type version tags and heap; keep them alive."""
    classes = [type(f"_Layout{n}", (), {}) for n in range(layout * LAYOUT_CLASSES)]
    for cls in classes:
        getattr(cls, "absent", None)  # the first lookup gives the class its version tag
    return classes


def main(spec_path: str) -> int:
    start = time.perf_counter()
    _shifted = shift_layout(int(os.environ.get(LAYOUT_VARIABLE, "0")))  # noqa: F841
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
