"""What a test declares for the gate, through ``@pytest.mark.perfgate(...)``.

``family`` (e.g. "sdpa": ``--perf-gate-threshold sdpa=0.2`` applies), ``threshold`` (``0.1`` or
``"10%"``, wins over the command line) and ``ratios`` (same-run ratios, ``perfgate.Ratio``).
Marks on the module, the function and a parameter combine, the closest winning for family and
threshold.
The declarations are saved in each benchmark's ``extra_info["perfgate"]``, so a saved run carries
its own rules and ``perfgate compare`` applies them without the tests at hand.
"""

from __future__ import annotations

import pytest

from perfgate.fields import Declared, Ratio
from perfgate.verdict.thresholds import parse_fraction

KEYWORDS = {Declared.FAMILY, Declared.THRESHOLD, Declared.RATIOS}  # the marker's, stored alike


def declarations(item: pytest.Item) -> dict:
    """The merged ``perfgate`` marks of a test item, as plain JSON values."""
    merged: dict = {}
    ratios: list[dict] = []
    for mark in reversed(list(item.iter_markers("perfgate"))):  # farthest first
        unknown = set(mark.kwargs) - KEYWORDS
        if unknown or mark.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.perfgate takes only keyword arguments "
                f"{sorted(KEYWORDS)}; got {sorted(unknown) or list(mark.args)}"
            )
        if mark.kwargs.get(Declared.FAMILY) is not None:
            merged[Declared.FAMILY] = mark.kwargs[Declared.FAMILY]
        if mark.kwargs.get(Declared.THRESHOLD) is not None:
            merged[Declared.THRESHOLD] = _threshold(item, mark.kwargs[Declared.THRESHOLD])
        for ratio in mark.kwargs.get(Declared.RATIOS, ()):
            if not isinstance(ratio, Ratio):
                raise pytest.UsageError(f"{item.nodeid}: perfgate ratios must be perfgate.Ratio")
            ratios.append(ratio.as_json())
    if ratios:
        merged[Declared.RATIOS] = ratios
    return merged


def _threshold(item: pytest.Item, value) -> float:
    """A marker's threshold as a fraction: ``0.1`` or ``"10%"``; a bare 10 is ambiguous."""
    try:
        return parse_fraction(value)
    except ValueError as error:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.perfgate: {error}") from None


def uses_benchmark(item: pytest.Item) -> bool:
    return "benchmark" in getattr(item, "fixturenames", ())


def test_name(item: pytest.Item) -> str:
    return item.nodeid.split("::")[-1].split("[")[0]


def ratio_group(item: pytest.Item) -> str:
    """The cases that must be timed in one session: a case and the partners of its same-run
    ratios (its test function's cases that differ only in a ratio's ``key`` parameter). A case
    without such ratios is a group of its own. Used to split the matrix over workers and shards."""
    keys = {
        ratio["key"] for ratio in declarations(item).get(Declared.RATIOS, []) if ratio.get("key")
    }
    params = getattr(getattr(item, "callspec", None), "params", None) or {}
    if not keys & set(params):
        return item.nodeid
    others = {name: repr(value) for name, value in params.items() if name not in keys}
    return f"{item.nodeid.split('[', 1)[0]}{sorted(others.items())}"
