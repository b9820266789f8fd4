"""perfgate's one pytest wiring: only perfgate/plugin.py defines pytest hooks and fixtures and
registers plugins; the passes after the main loop run in the one order written there; a
session's state lives in its ``config.stash``, so sessions in one process share nothing."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from helpers import COUNTED_CASE, TIMED_CASE, run, virtual_clock_project

PACKAGE = Path(__file__).resolve().parents[1] / "perfgate"
WIRING = {"plugin.py", "hookspec.py"}  # the hooks, and the spec of the one a project implements
PROCESS_STATE = {"measure/nvml.py"}  # the GPU this process reads (a worker pins its own)


def hook_names() -> set[str]:
    """Every hook that pytest, pytest-benchmark, pytest-xdist and perfgate declare."""
    import pytest_benchmark.hookspec
    import xdist.newhooks
    from _pytest import hookspec

    from perfgate import hookspec as ours

    modules = (hookspec, pytest_benchmark.hookspec, xdist.newhooks, ours)
    return {name for module in modules for name in dir(module) if name.startswith("pytest_")}


def wiring_outside_the_plugin(name: str, source: str, hooks: set[str]) -> list[str]:
    """What module ``name`` wires into pytest itself: hooks, hookimpl marks, fixtures, plugins it
    registers; and the module-level state it switches (``global``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            marks = " ".join(ast.unparse(d) for d in node.decorator_list)
            if node.name in hooks or "hookimpl" in marks or "fixture" in marks:
                found.append(f"{name}: {node.name}")
        elif isinstance(node, ast.Attribute) and node.attr == "register":
            if "pluginmanager" in ast.unparse(node.value):
                found.append(f"{name}: registers a plugin")
        elif isinstance(node, ast.Global) and name not in PROCESS_STATE:
            found.append(f"{name}: global {', '.join(node.names)}")
    return found


def test_only_the_plugin_wires_perfgate_into_pytest():
    hooks = hook_names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name not in WIRING:
            found += wiring_outside_the_plugin(name, path.read_text(encoding="utf-8"), hooks)
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "def pytest_collection_modifyitems(items):\n    pass",
        "class Gate:\n    def pytest_runtestloop(self, session):\n        pass",
        "@pytest.hookimpl(optionalhook=True)\ndef on_node(node):\n    pass",
        "@pytest.fixture\ndef counts():\n    return {}",
        "def configure(config):\n    config.pluginmanager.register(object(), 'x')",
        "_on = False\ndef switch():\n    global _on\n    _on = True",
    ],
)
def test_the_wiring_check_finds_each_way_around_the_plugin(source):
    assert wiring_outside_the_plugin("gate.py", source, hook_names())


@pytest.mark.slow
def test_the_gate_runs_its_passes_after_the_main_loop_in_one_order(pytester, monkeypatch):
    project = virtual_clock_project(
        pytester, monkeypatch, test_timed=TIMED_CASE, test_counted=COUNTED_CASE
    )
    monkeypatch.setenv("FAKE_LAUNCHES", "102")
    assert run(project, "--benchmark-save=base").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")  # every case 50 % slower
    result = run(project, "--perf-gate", "--perf-store-profiles=always")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "perfgate gate: re-running 2 benchmarks to confirm",  # judged: slower, unconfirmed
            "perfgate: counting the launches of 1 wall-timed CUDA cases",  # after every timing
            "perfgate gate: profiling 2 confirmed regressions into *",  # the timed ones: confirmed
            "perfgate: profiling 3 timed cases to store with the run",  # last: every timed case
            "*perfgate gate*",
            "*Confirmed regressions*",
        ]
    )


MODE_CASE = """
import time
from pathlib import Path

from perfgate.measure import mode


def test_case(benchmark):
    Path("profiling.txt").write_text(str(mode.of(benchmark).profiling()))  # what time_wall asks
    benchmark.pedantic(time.sleep, args=(0,), rounds=2)
"""


@pytest.fixture
def dynamo_imported() -> None:
    """torch._dynamo imported before pytester starts: its in-process runs forget the modules they
    imported, and torch.profiler's import of torch._dynamo registers operator libraries, which
    cannot register twice in one process."""
    import torch._dynamo  # noqa: F401


def test_a_session_does_not_inherit_the_mode_of_the_one_before(
    dynamo_imported, pytester, monkeypatch, tmp_path
):
    virtual_clock_project(pytester, monkeypatch, test_case=MODE_CASE)  # xdist's variables gone
    plugins = ("-p", "perfgate.plugin", "-p", "no:cacheprovider", "-p", "no:xdist")
    profiled = pytester.runpytest_inprocess(*plugins, f"--perf-profile={tmp_path / 'profile'}")
    assert profiled.ret == 0
    assert (pytester.path / "profiling.txt").read_text() == "True"  # profiled instead of timed
    assert (tmp_path / "profile" / "test_case.txt").exists()
    # the next session in this process does not ask for perfgate: timed as pytest-benchmark does
    timed = pytester.runpytest_inprocess(*plugins, f"--benchmark-json={tmp_path / 'run.json'}")
    assert timed.ret == 0
    assert (pytester.path / "profiling.txt").read_text() == "False"
    (case,) = json.loads((tmp_path / "run.json").read_text())["benchmarks"]
    assert case["stats"]["rounds"] == 2  # timed


def test_the_options_are_read_once_into_a_frozen_object(pytester):
    import dataclasses

    from perfgate import options

    config = pytester.parseconfig("-p", "perfgate.plugin", "--perf-gate", "--perf-shard=1/2",
                                  "--perf-gate-threshold=0.2", "--benchmark-save=x")  # fmt: skip
    read = options.read(config)
    assert (read.gate, read.shard, read.saves) == (True, "1/2", True)
    assert [str(spec) for spec in read.thresholds] == ["0.2"]  # checked, as written
    assert read.stores_profiles and not read.instructions  # saved: profiles stored by default
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.gate = False  # type: ignore[misc]


@pytest.mark.parametrize(
    "given, line",
    [
        ("--perf-callgrind-repeats=1", "--perf-callgrind-repeats: '1': give a whole number, 2"),
        ("--perf-callgrind-layouts=0", "--perf-callgrind-layouts: '0': give a whole number, 1"),
        ("--perf-gate-threshold=15", "--perf-gate-threshold: threshold '15' is ambiguous"),
    ],
)
def test_an_option_that_cannot_work_is_refused_where_pytest_parses_it(pytester, given, line):
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "perfgate.plugin", "-p", "no:cacheprovider", given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0].startswith("ERROR: usage: ")  # pytest's own usage error
    assert f"error: argument {line}" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_what_the_gate_learns_after_judging_makes_a_new_run():
    from perfgate.benchmark import run_from_json
    from perfgate.session.gate import with_info

    entry = {"name": "test_a", "fullname": "t.py::test_a", "stats": {"data": [1.0, 1.1]},
             "extra_info": {"clock": "perf_counter"}}  # fmt: skip
    judged = run_from_json({"benchmarks": [entry]}, None)
    later = with_info(judged, "profile", {"t.py::test_a": {"time_us": []}})
    assert later.benchmarks["t.py::test_a"].extra_info == {
        "clock": "perf_counter",
        "profile": {"time_us": []},
    }
    assert judged.benchmarks["t.py::test_a"].extra_info == {"clock": "perf_counter"}
    assert with_info(judged, "profile", {}) is judged
