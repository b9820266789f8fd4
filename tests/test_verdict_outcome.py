"""Every finding comes from the rules listed in ``verdict.rules.RULES``, and the stages import
one way (every path reaching the same verdict: tests/test_verdict_one_judge.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import entry, rounds_at, run_of

from perfgate.session.declarations import declarations
from perfgate.verdict import Verdict, judge, rules

ROOT = Path(__file__).resolve().parents[1]


def gated_cases() -> tuple[dict, dict]:
    """A baseline and a current run in which each rule family finds a regression: time, peak
    memory, instructions, exact counters, launch counts."""
    timed = {"clock": "perf_counter"}
    counted = {"measure": "instructions", "counters": {"aten_ops": 3}}
    host = {"host_bound": True, "launch_counts": {"kernel_launches": 4}}
    before = [
        entry("t.py::slower", rounds_at(1e-3, 0), extra=timed),
        entry("t.py::memory", rounds_at(1e-3, 1), extra={**timed, "peak_bytes": 1000}),
        entry("t.py::counted", [1e-6] * 3, extra={**counted, "instructions": 1000}),
        entry("t.py::host", rounds_at(1e-3, 2), extra=host),
    ]
    now = [
        entry("t.py::slower", rounds_at(2e-3, 3), extra=timed),
        entry("t.py::memory", rounds_at(1e-3, 4), extra={**timed, "peak_bytes": 2000}),
        entry("t.py::counted", [1e-6] * 3,
              extra={**counted, "instructions": 1000, "counters": {"aten_ops": 4}}),
        entry("t.py::host", rounds_at(1e-3, 5),
              extra={**host, "launch_counts": {"kernel_launches": 5}}),
    ]  # fmt: skip
    return run_of(*before), run_of(*now)


class Spy:
    """One rule standing for ``listed``: their findings, each message noted in ``found``."""

    def __init__(self, listed, found: list[str]):
        self.listed, self.found = listed, found

    def check(self, case) -> list:
        findings = [f for rule in self.listed for f in rule.check(case)]
        self.found.extend(f.message for f in findings)
        return findings


def test_every_finding_comes_from_the_rules_listed_in_one_place(monkeypatch):
    before, now = gated_cases()
    results = {r.name: r for r in judge([before], now, confirmation=now)}
    assert {r.verdict for r in results.values()} == {Verdict.REGRESSION}
    found: list[str] = []
    for measured, listed in rules.RULES.items():
        monkeypatch.setitem(rules.RULES, measured, (Spy(listed, found),))
    again = {r.name: r for r in judge([before], now, confirmation=now)}
    assert again == results  # the same verdicts, every one through the listed rules
    for result in results.values():  # each failure named is a finding of a listed rule
        assert any(message in result.message for message in found), result
    for measured in rules.RULES:
        monkeypatch.setitem(rules.RULES, measured, ())
    silent = judge([before], now, confirmation=now)
    assert not any(r.verdict in (Verdict.REGRESSION, Verdict.UNCONFIRMED) for r in silent)


def test_every_rule_has_one_interface_and_is_listed_once():
    listed = list(rules.all_rules())
    assert len({type(rule) for rule in listed}) == len(listed)
    names = {"time", "time improvement", "memory", "ratio", "instructions", "exact counters",
             "launch counts"}  # fmt: skip
    assert {rule.name for rule in listed} == names
    assert all(callable(rule.check) for rule in listed)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


@pytest.mark.parametrize(
    "stage, forbidden",
    [
        ("measure", ("perfgate.verdict",)),
        (
            "verdict",
            (
                "perfgate.store",
                "perfgate.report",
                "perfgate.cli",
                "perfgate.measure",
                "pytest",
                "torch",
            ),
        ),
    ],
)
def test_the_stages_import_one_way(stage, forbidden):
    for path in sorted((ROOT / "perfgate" / stage).glob("*.py")):
        wrong = {m for m in imports_of(path)
                 if any(m == f or m.startswith(f + ".") for f in forbidden)}  # fmt: skip
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_declaring_a_ratio_does_not_import_the_verdict():
    code = (
        "import sys, perfgate; perfgate.Ratio('r', field='f'); "
        "print(sorted(m for m in sys.modules if m.startswith('perfgate.verdict')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_verdict_loads_neither_pytest_nor_torch():
    """Every verdict module imported, in a fresh process: neither pytest nor torch is loaded
    (the verdict reads stored data through perfgate.benchmark and perfgate.fields only)."""
    code = (
        "import importlib, pkgutil, sys, perfgate.verdict as v; "
        "[importlib.import_module('perfgate.verdict.' + m.name) "
        " for m in pkgutil.iter_modules(v.__path__)]; "
        "print('pytest' in sys.modules, 'torch' in sys.modules, "
        "any(m.startswith('perfgate.measure') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False"]


class MarkedItem:
    """A test item as ``declarations`` reads it: one ``perfgate`` mark."""

    nodeid = "perf_tests/test_x.py::test_kernel"

    def __init__(self, **kwargs):
        self.mark = pytest.mark.perfgate(**kwargs).mark

    def iter_markers(self, name: str) -> list:
        return [self.mark]


@pytest.mark.parametrize("value", [0.1, "0.1", "10%", " 10 % "])
def test_a_marker_threshold_is_a_fraction_or_a_percentage(value):
    assert declarations(MarkedItem(threshold=value)) == {"threshold": pytest.approx(0.1)}


@pytest.mark.parametrize("value, words", [(10, "ambiguous"), ("10", "ambiguous"), ("x", "e.g.")])
def test_a_marker_threshold_that_is_ambiguous_is_one_usage_line(value, words):
    with pytest.raises(pytest.UsageError, match=words) as error:
        declarations(MarkedItem(threshold=value))
    assert "\n" not in str(error.value) and "test_kernel" in str(error.value)
