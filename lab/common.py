"""What the lab report's sections share: benchmark cases labelled by machine, grouping, and
figures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from perfgate.benchmark import Benchmark, Run
from perfgate.fields import Field

T = TypeVar("T")


@dataclass(frozen=True)
class Case:
    """One benchmark of one run, with the label of the machine it ran on."""

    machine: str
    run: Run
    benchmark: Benchmark

    @property
    def info(self) -> dict:
        """Every field the case stored (``fields.Field``, ``fields.Fact``, the test's own)."""
        return self.benchmark.extra_info

    def fact(self, name: str, default: object = None) -> object:
        """One stored field, by its name in ``fields``; ``default`` when absent."""
        return self.benchmark.fact(name, default)

    @property
    def params(self) -> dict:
        return self.benchmark.params

    @property
    def test(self) -> str:
        """The test function's name: 'test_attention' for 'test_attention[cuda-...]'."""
        return self.benchmark.test

    @property
    def device(self) -> str:
        return str(self.fact(Field.DEVICE) or self.params.get("bench_device") or "?")

    @property
    def where(self) -> str:
        """'machine (device)', the label of a row or a plot panel."""
        return f"{self.machine} ({self.device})"

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return self.benchmark.median

    @property
    def fullname(self) -> str:
        return self.benchmark.fullname


def machine_labels(runs: Sequence[Run]) -> list[str]:
    """A label per run: its hardware key, with the file name added where two keys are equal."""
    keys = [run.hardware_key for run in runs]
    return [
        key if keys.count(key) == 1 else f"{key} {run.path.stem}"
        for key, run in zip(keys, runs, strict=True)
    ]


def all_cases(runs: Sequence[Run]) -> list[Case]:
    labels = machine_labels(runs)
    return [
        Case(label, run, benchmark)
        for label, run in zip(labels, runs, strict=True)
        for benchmark in run.benchmarks.values()
    ]


def of_test(cases: Iterable[Case], test: str) -> list[Case]:
    return [case for case in cases if case.test == test]


def grouped(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, list[T]]:
    """Items (cases, table rows) by ``key``, keys and members in first-seen order."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def ordered(values: Iterable[object], first: Sequence[object] = ()) -> list[object]:
    """Distinct values: those in ``first`` (in that order) that occur, then the rest as seen."""
    seen = list(dict.fromkeys(values))
    return [v for v in first if v in seen] + [v for v in seen if v not in first]


def shape_text(shape: Sequence[int] | None) -> str:
    return "x".join(map(str, shape)) if shape else "?"


def power_of_two(count: int) -> str:
    """2^25 for 33554432; the plain number otherwise."""
    exponent = count.bit_length() - 1
    return f"2^{exponent}" if count > 0 and count == 1 << exponent else f"{count:,}"


class Figures:
    """Draws the report's PNGs into ``folder`` and returns the markdown that shows them.

    With ``enabled`` False nothing is drawn and no markdown is returned, so a report can be
    written without matplotlib (``--no-plots``).
    """

    def __init__(self, folder: Path, enabled: bool = True, progress=None):
        self.folder = Path(folder)
        self.enabled = enabled
        self.progress = progress if progress is not None else sys.stderr
        self.written: list[Path] = []

    def draw(self, name: str, alt: str, plot: Callable[..., Path], *args, **kwargs) -> list[str]:
        """Call ``plot(path, *args, **kwargs)`` for ``folder/name``; the image's markdown lines."""
        if not self.enabled:
            return []
        path = self.folder / name
        if self.progress is not None:
            print(f"plotting {path}", file=self.progress)
        self.written.append(plot(path, *args, **kwargs))
        return [f"![{alt}]({name})", ""]
