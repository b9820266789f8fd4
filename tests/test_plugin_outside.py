"""perfgate as another project meets it: installed, nothing changes until a session asks for it
(a --perf-* option, or ``perfgate = true``); asked, it gates that project's benchmarks in its
own pytest-benchmark storage and names its own test paths. The project here has no perfgate
configuration, a conftest with its own --device option, and pytest-benchmark's conventions."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest
from helpers import BENCHMARK, perfgate, virtual_clock_project

from perfgate.session.baseline import GATE_NOT_RUN

# another project's conftest: its own --device option, as kornia's and many others' have
CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="the project's own device option")
"""
NO_TORCH = """
import sys

def test_torch_was_not_imported():
    assert "torch" not in sys.modules and "triton" not in sys.modules
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    project = virtual_clock_project(pytester, monkeypatch, test_bench=BENCHMARK)
    project.makeconftest(CONFTEST)
    project.makeini("[pytest]\nfilterwarnings =\n    error\n")
    return project


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "perfgate.plugin", "-p", "no:cacheprovider",
        "--benchmark-timer=virtual_clock.clock", "--device=cpu", *args,
    )  # fmt: skip


def runs_in(folder: Path) -> list[Path]:
    return sorted(folder.rglob("0*.json"))


def output_of(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


# --- unasked: pytest-benchmark as if perfgate were absent ---------------------------------------
def test_unasked_saves_compare_and_compare_fail_are_pytest_benchmarks(project, monkeypatch):
    result = run(project, "--benchmark-autosave")
    assert result.ret == 0, output_of(result)
    assert "Saved benchmark data in:" in result.stderr.str()
    [saved] = runs_in(project.path / ".benchmarks")
    assert not (project.path / "baselines").exists()
    assert "data" not in json.loads(saved.read_text())["benchmarks"][0]["stats"]  # not forced
    assert "perfgate" not in json.loads(saved.read_text())["machine_info"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(saved.stat().st_mode) == 0o666 & ~umask

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.010")  # 5x slower
    result = run(project, "--benchmark-compare", "--benchmark-compare-fail=min:5%")
    assert result.ret == 1, output_of(result)
    assert "Performance has regressed" in output_of(result)
    assert "perfgate:" not in output_of(result) and "perfgate gate" not in output_of(result)


def test_unasked_compare_with_a_run_perfgate_saved_sees_the_same_machine(project):
    assert run(project, "--perf-gate-threshold=0.5", "--benchmark-save=asked").ret == 0
    result = run(project, "--benchmark-compare", "--benchmark-compare-fail=min:50%")
    assert result.ret == 0, output_of(result)  # no "machine_info is different" (an error here)
    assert "0001_asked" in output_of(result) and "INTERNALERROR" not in output_of(result)


def test_unasked_min_rounds_does_not_warn_under_filterwarnings_error(project):
    result = run(project, "--benchmark-min-rounds=3")
    assert result.ret == 0, output_of(result)
    assert "perfgate:" not in output_of(result) and "perfgate gate" not in output_of(result)


def test_unasked_session_imports_no_torch_and_lists_no_suite_fixtures(project):
    project.makepyfile(test_no_torch=NO_TORCH)
    assert run(project, "test_no_torch.py").ret == 0
    fixtures = output_of(run(project, "--fixtures"))
    for name in ("bench_device", "perf_tier", "perf_budget", "copy_roofline"):
        assert name not in fixtures


def test_without_pytest_benchmark_nothing_breaks(project):
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest_subprocess("-p", "perfgate.plugin", "-p", "no:benchmark",
                                          "--device=cpu", "test_plain.py")  # fmt: skip
    assert result.ret == 0, output_of(result)
    assert "INTERNALERROR" not in output_of(result)
    result = project.runpytest_subprocess(
        "-p", "perfgate.plugin", "-p", "no:benchmark", "--perf-gate", "test_plain.py"
    )
    assert result.ret == GATE_NOT_RUN and "pytest-benchmark is not loaded" in output_of(result)


# --- asked: the project's storage, its paths ---------------------------------------------------
@pytest.mark.slow
def test_asked_gate_uses_the_projects_storage_and_paths(project, monkeypatch):
    result = run(project, "--perf-gate", "test_bench.py")
    assert result.ret == GATE_NOT_RUN, output_of(result)
    assert "record one with `pytest test_bench.py --perf-gate --benchmark-save=NAME`" in output_of(
        result
    )

    assert run(project, "--benchmark-autosave").ret == 0  # pytest-benchmark's own run
    project.makepyfile(test_no_torch=NO_TORCH)
    result = run(project, "--perf-gate", "test_bench.py", "test_no_torch.py")
    assert result.ret == GATE_NOT_RUN, output_of(result)  # its run has no per-round data
    saved_data = "record the baseline again with `--benchmark-save=NAME --benchmark-save-data`"
    assert saved_data in output_of(result)

    storage = "--benchmark-storage=.benchmarks"  # a plain path, as pytest-benchmark takes it
    saving = ("--perf-gate-threshold=0.5", "--benchmark-save=base", storage)
    assert run(project, *saving).ret == 0
    assert [p.name for p in runs_in(project.path / ".benchmarks")][-1] == "0002_base.json"
    assert not (project.path / "baselines").exists()
    result = run(project, "--perf-gate", "test_bench.py", "test_no_torch.py")
    assert result.ret == 0, output_of(result)  # torch stays out of a gated session too

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.010")
    result = run(project, "--perf-gate", "test_bench.py")
    assert result.ret == 1, output_of(result)
    assert "Confirmed regressions" in output_of(result)
    # a plain benchmark(fn) case is profiled too (cProfile here: the test imports no torch)
    assert "profiling 1 confirmed regressions" in output_of(result)
    assert "perfgate ab" not in output_of(result)  # no commit to compare with outside git


def test_the_command_line_finds_this_machines_key_without_torch(monkeypatch):
    from perfgate.measure.machine import hardware_key, this_machine_key

    monkeypatch.setitem(sys.modules, "torch", None)  # perfgate installed without perfgate[torch]
    assert this_machine_key() == hardware_key(use_cuda=False)


def test_the_command_line_reads_the_projects_pytest_benchmark_storage(project, monkeypatch):
    for name in ("first", "second"):  # asked (a --perf-* option): per-round data saved
        assert run(project, "--perf-gate-threshold=0.5", f"--benchmark-save={name}").ret == 0
    monkeypatch.chdir(project.path)
    status, out, err = perfgate("compare")
    assert status == 0, err
    assert "0001_first" in out + err and "test_work" in out


# --- asked: saved runs stay small, readable by pytest-benchmark, exact in their statistics -------
MANY_ROUNDS = """
from virtual_clock import work

def test_many(benchmark):
    benchmark.pedantic(work, rounds=200_000, iterations=1)
"""


@pytest.mark.slow
def test_a_200000_round_run_is_saved_with_bounded_rounds_and_exact_stats(project, monkeypatch):
    from perfgate.fields import KEPT_ROUNDS, ROUNDS_KEPT

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.000001")
    project.makepyfile(test_many=MANY_ROUNDS)
    # the same virtual rounds, saved by pytest-benchmark alone with every round, then by perfgate
    assert run(project, "test_many.py", "--benchmark-save=all", "--benchmark-save-data").ret == 0
    result = run(project, "test_many.py", "--perf-gate-threshold=0.5", "--benchmark-save=kept")
    assert result.ret == 0, output_of(result)
    every, bounded = runs_in(project.path / ".benchmarks")
    [everything], [saved] = (json.loads(p.read_text())["benchmarks"] for p in (every, bounded))
    data = everything["stats"].pop("data")
    assert len(data) == 200_000 == saved["stats"]["rounds"]
    assert saved["stats"].pop("data") == [data[round(i * 199_999 / 1999)] for i in range(2000)]
    assert saved["stats"].pop(ROUNDS_KEPT) == KEPT_ROUNDS == 2000
    assert saved["stats"] == everything["stats"]  # min, max, mean, stddev, median, iqr, ...
    assert bounded.stat().st_size < every.stat().st_size / 50

    reader = "from pytest_benchmark.cli import main; main()"  # its `pytest-benchmark` command
    compare = project.run(sys.executable, "-c", reader, "compare", "--group-by=name", str(bounded))
    assert compare.ret == 0 and "test_many" in compare.stdout.str(), output_of(compare)
    assert run(project, "test_many.py", "--perf-gate").ret == 0  # the same rounds: unchanged
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.000002")
    result = run(project, "test_many.py", "--perf-gate")
    assert result.ret == 1 and "Confirmed regressions" in output_of(result), output_of(result)


# --- the first hour (issue 30): the first run works as written ---------------------------------
FUNCTION_PARAMETER = """
import pytest
from virtual_clock import work

def impl_a():
    work()

@pytest.mark.parametrize("fn", [impl_a])
def test_fn(benchmark, fn):
    benchmark.pedantic(fn, rounds=20, iterations=1, warmup_rounds=1)
"""


def test_a_function_object_parameter_is_saved_as_pytest_benchmark_writes_it(project):
    project.makepyfile(test_fn=FUNCTION_PARAMETER)
    result = run(project, "--perf-gate-threshold=0.5", "--benchmark-save=fn")
    assert result.ret == 0, output_of(result)
    [saved] = runs_in(project.path / ".benchmarks")
    params = {b["name"]: b["params"] for b in json.loads(saved.read_text())["benchmarks"]}
    assert params["test_fn[impl_a]"]["fn"].startswith("UNSERIALIZABLE[<function impl_a")
    assert not list((project.path / "perfgate-results").glob("unsaved/*"))  # nothing put aside


def test_the_first_gated_save_records_the_baseline_and_says_nothing_to_gate_yet(project):
    first = run(project, "--perf-gate", "--benchmark-save=first")
    output = output_of(first)
    assert first.ret == 8, output
    assert "perfgate gate: nothing to gate yet: no" in output and "(exit 8)" in output
    assert "Traceback" not in output
    [saved] = runs_in(project.path / ".benchmarks")
    assert json.loads(saved.read_text())["benchmarks"][0]["stats"]["data"]  # gateable
    second = run(project, "--perf-gate")
    assert second.ret == 0, output_of(second)
    assert "perfgate gate against" in output_of(second)


def test_perf_first_baseline_saves_the_first_run_exits_0_and_then_only_gates(project):
    first = run(project, "--perf-gate", "--perf-first-baseline")
    output = output_of(first)
    assert first.ret == 0, output
    assert "perfgate gate: nothing to gate yet: no" in output and "(exit 0)" in output
    [saved] = runs_in(project.path / ".benchmarks")
    assert saved.name.endswith("_first.json")
    second = run(project, "--perf-gate", "--perf-first-baseline")
    assert second.ret == 0, output_of(second)
    output = output_of(second)
    assert output.index("Legend:") < output.index("perfgate gate against")  # the verdicts last
    assert runs_in(project.path / ".benchmarks") == [saved]  # a baseline there: nothing saved


def test_the_hint_of_a_gate_without_a_baseline_leads_to_a_gateable_one(project):
    result = run(project, "--perf-gate")
    output = output_of(result)
    assert result.ret == GATE_NOT_RUN, output
    hint = output.split("record one with `")[1].split("`")[0]
    assert hint == "pytest --perf-gate --benchmark-save=NAME", hint
    followed = run(project, *hint.split()[1:-1], "--benchmark-save=base")  # as written
    assert followed.ret == 8, output_of(followed)
    assert run(project, "--perf-gate").ret == 0


SPACED_ID = """
import pytest
from virtual_clock import work

@pytest.mark.parametrize("x", ["a b-1"], ids=str)
def test_x(benchmark, x):
    benchmark(work)
"""


def test_the_hint_for_a_node_id_pastes_into_a_shell_as_the_exact_id(project):
    project.makepyfile(test_a=SPACED_ID)
    case = "test_a.py::test_x[a b-1]"  # a shell would glob [...] and split at the space
    output = output_of(run(project, "--perf-gate", case))
    hint = output.split("record one with `")[1].split("`")[0]
    assert shlex.split(hint) == ["pytest", case, "--perf-gate", "--benchmark-save=NAME"], hint


def test_an_option_given_at_its_default_value_asks_for_perfgate(project):
    result = run(project, "--perf-store-profiles=saved", "--benchmark-save=base")
    assert result.ret == 0, output_of(result)
    [saved] = runs_in(project.path / ".benchmarks")
    data = json.loads(saved.read_text())
    assert "perfgate" in data["machine_info"] and data["benchmarks"][0]["stats"]["data"]


def test_compare_on_autosaved_runs_shows_their_medians_and_why_not_gated(project):
    assert run(project, "--benchmark-autosave").ret == 0
    assert run(project, "--benchmark-autosave").ret == 0
    a, b = runs_in(project.path / ".benchmarks")
    status, out, err = perfgate("compare", str(a), str(b))
    assert status == 0, err
    row = next(line for line in out.splitlines() if "test_work" in line)
    assert " 2 ms " in f" {row} " or "2.0" in row, row  # the medians, not "-"
    assert "%" in row and "no per-round data" in row, row


def test_a_baselines_folder_outside_the_project_given_apart_is_refused_with_the_fix(project):
    outside = project.path.parent / f"{project.path.name}-baselines"
    outside.mkdir()
    result = run(project, "--perf-baselines", str(outside), "--benchmark-save=kept")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output_of(result)
    assert f"write --perf-baselines={outside} (with '=')" in output_of(result)
    assert "Traceback" not in output_of(result) and not (project.path / "ran").exists()
    result = run(project, f"--perf-baselines={outside}", "--benchmark-save=kept")
    assert result.ret == 0 and f"rootdir: {project.path}" in output_of(result)
    assert len(runs_in(outside)) == 1 and not (project.path.parent / "perfgate-results").exists()
    inside = run(project, "--perf-baselines", "baselines", "--benchmark-save=inside")
    assert inside.ret == 0, output_of(inside)  # inside the project, given apart: no harm
