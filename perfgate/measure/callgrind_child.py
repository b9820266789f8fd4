"""Inside valgrind: the counting process that ``measure.callgrind.measure`` starts (``main``), and
how it counts one benchmarked call (``Counter.count``).

``main`` shifts the heap layout, then runs pytest on the selected tests with the caller's options;
perfgate's plugin, seeing ``fields.COUNTING_SPEC``, hands every ``benchmark(...)`` and
``benchmark.pedantic(...)`` call to ``Counter.count`` instead of timing it. Everything before the
call (imports, fixtures, the test's own setup) runs with instrumentation off, at near native
speed; the call itself is run once uninstrumented (warm-up: a compiled model compiles here), then
instrumentation comes on for one counted call (which sets the calls per repeat, ``calls_for``),
an uncounted warm-up repeat and the counted repeats, each dumped to its own file, and goes off
again before the exact counters are counted.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

from perfgate.measure.callgrind import LAYOUT_VARIABLE, annotate, counted
from perfgate.measure.callgrind_inject import crc32_cost, injection
from perfgate.measure.callgrind_requests import Requests
from perfgate.measure.exact_counters import dynamo_graphs, exact_counters
from perfgate.measure.target import Target

# A repeat is at least this many instructions where MAX_CALLS allow, so that one-off effects (an
# allocator's first fit, a dictionary resize) stay far below 1 % of it; the calls per repeat are
# a power of two, so a count a little off another session's gives the same number of calls.
TARGET_INSTRUCTIONS = 2**23
MAX_CALLS = 2**10  # bounds the time of a small call with a costly setup (run for each call)


def calls_for(instructions_per_call: float) -> int:
    """Calls per repeat: the smallest power of two with TARGET_INSTRUCTIONS, up to MAX_CALLS."""
    calls = 1
    while calls < MAX_CALLS and calls * instructions_per_call < TARGET_INSTRUCTIONS:
        calls *= 2
    return calls


class Counter:
    """Counts benchmarked calls in this process; its dumps are ``folder/callgrind.out.N``."""

    def __init__(self, requests: Requests, folder: Path, repeats: int):
        self.requests, self.folder, self.repeats = requests, folder, repeats
        self.written = 0  # dumps written so far: callgrind numbers them from 1
        self.cpu = 0.0  # CPU seconds in counted calls since count() last reset it
        self.cost: tuple[float, float] | None = None  # the injected crc32's, once measured

    def count(self, target: Target, inject: float = 0.0) -> tuple[dict, object]:
        """Warm up, count and dump ``target`` (instrumentation off on entry and on exit); the
        raw counts (dump numbers, calls, exact counters) and the warm-up call's result.
        ``inject``: gate validation, the share of instructions to add (``callgrind_inject``)."""
        dynamo_graphs(clear=True)
        result = target.run(1)
        graphs = dynamo_graphs()
        self.requests.start_instrumentation()
        try:
            # the first dump after instrumentation comes on again carries callgrind's
            # bookkeeping of the switch (a count wrapped below zero): an empty one, discarded
            self.requests.dump_stats()
            self.written += 1
            calls = calls_for(self.per_call(self.dump(target, 1), 1))
            self.dump(target, calls)  # uncounted: the repeat's code is instrumented here
            self.cpu = 0.0
            numbers = [self.dump(target, calls) for _ in range(self.repeats)]
            cpu = self.cpu / (self.repeats * calls)  # CPU seconds of a counted call (no dump)
            extra, injected, uninjected = None, 0, []
            if inject:
                extra, injected, uninjected = self._injection(target, calls, numbers, inject)
                numbers = [self.dump(target, calls, extra) for _ in range(self.repeats)]
        finally:
            self.requests.stop_instrumentation()
        counters = exact_counters(
            lambda start, stop: target.run(calls, start, stop, extra), calls, graphs
        )
        raw = {"dumps": numbers, "calls": calls, "counters": counters, "cpu_seconds": cpu}
        return {**raw, "injected_instructions": injected, "uninjected_per_call": uninjected}, result

    def dump(self, target: Target, calls: int, extra=None) -> int:
        """Count ``calls`` calls of ``target`` (collection on around them) into a dump of its
        own; the dump's number."""
        toggle = self.requests.toggle_collect
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            target.run(calls, toggle, toggle, extra)
            self.cpu += time.process_time() - start
        finally:
            self.requests.dump_stats()
            gc.enable()
        self.written += 1
        return self.written

    def per_call(self, number: int, calls: int) -> float:
        """Counted instructions per call of dump ``number``."""
        return counted(*annotate(self.folder / f"callgrind.out.{number}")) / calls

    def _injection(self, target: Target, calls: int, numbers: list[int], inject: float):
        """Gate validation: a crc32 after each call worth ``inject`` of the call's count, and
        the counts without it (``callgrind_inject``)."""
        if self.cost is None:
            self.cost = crc32_cost(lambda call: self.per_call(self.dump(Target(call), 20), 20))
        uninjected = [self.per_call(n, calls) for n in numbers]
        own = statistics.median(uninjected)
        extra, expected = injection(self.cost, inject * own)
        # a crc32 costs less after the call in one loop than alone in its own: size it in place
        added = self.per_call(self.dump(target, calls, extra), calls) - own
        extra, injected = injection((self.cost[0] + added - expected, self.cost[1]), inject * own)
        return extra, injected, uninjected


# Layout N > 0 makes N * LAYOUT_CLASSES classes, each looked up once, before anything else is
# imported: every later type gets another version tag and every later object another address, so
# the method cache's collisions fall elsewhere (its index mixes the two).
LAYOUT_CLASSES = 97


def shift_layout(layout: int) -> list[type]:
    """Classes that shift this process's type version tags and heap; keep them alive."""
    classes = [type(f"_Layout{n}", (), {}) for n in range(layout * LAYOUT_CLASSES)]
    for cls in classes:
        getattr(cls, "absent", None)  # the first lookup gives the class its version tag
    return classes


def main(spec_path: str) -> int:
    """Run pytest on the spec's tests with the spec's arguments, counting their benchmarks."""
    start = time.perf_counter()
    _shifted = shift_layout(int(os.environ.get(LAYOUT_VARIABLE, "0")))  # noqa: F841
    import pytest

    spec = json.loads(Path(spec_path).read_text())
    status = int(pytest.main(spec["args"]))
    print(f"perfgate callgrind: {time.perf_counter() - start:.0f} s in all", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
