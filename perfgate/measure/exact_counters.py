"""Exact counters of a host-overhead case, counted without callgrind: ATen operators dispatched
and Python functions called per call, and the graphs Dynamo compiled, its recompiles and its
graph breaks. They have no noise, so the gate fails on any increase."""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _AtenOperatorCounter(TorchDispatchMode):
    """Counts every ATen operator that reaches the Python dispatch mode."""

    def __init__(self) -> None:
        super().__init__()
        self.operators = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.operators += 1
        return func(*args, **(kwargs or {}))


def _run(fn: Callable[[], object], extra: Callable[[], object] | None, calls: int) -> None:
    for _ in range(calls):
        fn()
        if extra is not None:
            extra()


def python_calls(fn: Callable[[], object], extra: Callable[[], object] | None, calls: int) -> int:
    """Python function calls ('call' profile events; builtins are 'c_call' and not counted)
    made by ``calls`` calls of ``fn`` (and ``extra``)."""
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        for _ in range(calls):  # inline: a helper's own call would be counted too
            fn()
            if extra is not None:
                extra()
    finally:
        sys.setprofile(None)
    return count


def aten_operators(fn: Callable[[], object], extra: Callable[[], object] | None, calls: int) -> int:
    """ATen operators dispatched by ``calls`` calls of ``fn`` (and ``extra``)."""
    with _AtenOperatorCounter() as counter:
        _run(fn, extra, calls)
    return counter.operators


def per_call(total: int, calls: int) -> int | float:
    """``total / calls``, as an int when it divides evenly."""
    return total // calls if total % calls == 0 else round(total / calls, 3)


def exact_counters(
    fn: Callable[[], object],
    extra: Callable[[], object] | None,
    calls: int,
    graphs_after_first_call: int,
    count_aten_ops: bool = True,
) -> dict[str, int | float]:
    """The exact counters of a case after its counted calls (``torch._dynamo.utils.counters``
    cleared before the case was built): Dynamo's first, then Python calls, then ATen operators,
    whose dispatch mode may make Dynamo compile again."""
    dynamo = torch._dynamo.utils.counters
    graphs = dynamo["stats"]["unique_graphs"]
    counters: dict[str, int | float] = {
        "graphs": graphs_after_first_call,
        "recompiles": graphs - graphs_after_first_call,
        "graph_breaks": sum(dynamo["graph_break"].values()),
    }
    counters["python_calls"] = per_call(python_calls(fn, extra, calls), calls)
    if count_aten_ops:
        counters["aten_ops"] = per_call(aten_operators(fn, extra, calls), calls)
    return counters
