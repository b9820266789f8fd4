"""Exact counters of a counted call, counted without callgrind: Python functions called per call
always; where the test has imported torch, ATen operators dispatched per call, and where it has
imported Dynamo, the graphs Dynamo compiled, its recompiles and its graph breaks. They have no
noise, so the gate fails on any increase.

Each counter runs the same calls through ``run(start, stop)`` (``Target.run``: the counted part
between ``start()`` and ``stop()``). Nothing here imports torch: a pure-Python project has no
torch to import.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

Run = Callable[[Callable[[], object], Callable[[], object]], object]


def python_calls(run: Run) -> int:
    """Python function calls ('call' profile events; builtins are 'c_call' and not counted)
    made between ``start()`` and ``stop()``."""
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        if event == "call":
            count += 1

    # C callables: switching the profile on and off makes no Python call of its own
    try:
        run(functools.partial(sys.setprofile, profile), functools.partial(sys.setprofile, None))
    finally:
        sys.setprofile(None)
    return count


def aten_operators(run: Run) -> int:
    """ATen operators dispatched between ``start()`` and ``stop()`` (torch imported here)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        operators = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.operators += 1
            return func(*args, **(kwargs or {}))

    counter = Counter()
    run(counter.__enter__, functools.partial(counter.__exit__, None, None, None))
    return counter.operators


def per_call(total: int, calls: int) -> int | float:
    """``total / calls``, as an int when it divides evenly."""
    return total // calls if total % calls == 0 else round(total / calls, 3)


def dynamo_graphs(clear: bool = False) -> int | None:
    """The graphs Dynamo compiled in this process since its counters were last cleared (None
    where Dynamo was never imported); ``clear`` clears them first."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return None
    if clear:
        dynamo.utils.counters.clear()
    return dynamo.utils.counters["stats"]["unique_graphs"]


def exact_counters(run: Run, calls: int, graphs_after_warmup: int | None) -> dict[str, int | float]:
    """The exact counters per call of ``calls`` calls run by ``run``, after the counted
    repeats. ``graphs_after_warmup``: ``dynamo_graphs()`` after the first call, the Dynamo
    counters cleared before it. Dynamo's come first, then Python calls, then ATen operators,
    whose dispatch mode may make Dynamo compile again; they are left out where Dynamo compiled
    the call (such a mode makes a compiled frame run eagerly: the count would be eager's)."""
    counters: dict[str, int | float] = {}
    if graphs_after_warmup is not None:
        dynamo = sys.modules["torch._dynamo"].utils.counters
        counters["graphs"] = graphs_after_warmup
        counters["recompiles"] = dynamo["stats"]["unique_graphs"] - graphs_after_warmup
        counters["graph_breaks"] = sum(dynamo["graph_break"].values())
    counters["python_calls"] = per_call(python_calls(run), calls)
    if "torch" in sys.modules and not graphs_after_warmup:
        counters["aten_ops"] = per_call(aten_operators(run), calls)
    return counters
