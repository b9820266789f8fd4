"""This repository's suite plugin (perf_tests/suite.py, loaded by the root conftest.py): its own
options, the host allocator, the out-of-memory skip and the --device cuda gate check. None of it
is installed with perfgate (tests/test_plugin_outside.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import PLUGINS, assert_cannot_gate, saved_runs, virtual_clock_project

ROOT = Path(__file__).resolve().parent.parent
SUITE_BENCHMARK = """
from virtual_clock import work

def test_work(benchmark):
    benchmark.pedantic(work, rounds=5, iterations=1)
"""


@pytest.fixture
def suite_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # perf_tests.suite is imported from this checkout, as the root conftest.py does
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return virtual_clock_project(pytester, monkeypatch, test_bench=SUITE_BENCHMARK)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *PLUGINS, "-p", "perf_tests.suite", "--benchmark-timer=virtual_clock.clock", *args
    )


@pytest.mark.parametrize(
    ("option", "expected"),
    [(None, "retained"), ("--perf-malloc=default", "glibc default")],
)
def test_the_host_allocator_setting_is_saved_with_the_run(suite_project, option, expected):
    args = ["--device", "cpu", "--benchmark-save=run", *([option] if option else [])]
    assert run(suite_project, *args).ret == 0
    saved = json.loads(saved_runs(suite_project)[0].read_text())
    facts = saved["machine_info"]["perfgate"]
    assert expected in facts["host_malloc"] or facts["host_malloc"].startswith("unchanged")
    assert facts["tier"] == "default" and facts["hardware_key"] in str(saved_runs(suite_project)[0])


@pytest.mark.parametrize("option", ["--benchmark-min-rounds=50", "--benchmark-timer=time.time"])
def test_ignored_benchmark_options_warn(suite_project, option):
    result = run(suite_project, option, "-W", "default")
    assert result.ret == 0
    name = option.split("=")[0]
    assert f"{name} is ignored by cases timed with" in result.stdout.str() + result.stderr.str()


def test_out_of_memory_skips_the_case_and_the_run_goes_on(suite_project):
    suite_project.makepyfile(
        test_oom="""
        import torch

        def test_too_large():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

        def test_next():
            pass
        """
    )
    result = run(suite_project, "-rs", "test_oom.py")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*out of memory for this parameter: CUDA out of memory*", "*1 passed, 1 skipped*"]
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gate_on_cuda_without_a_gpu_cannot_run(suite_project):
    # before any baseline is looked for: the same line whether one exists or not
    assert_cannot_gate(
        run(suite_project, "--perf-gate", "--device", "cuda"), "no CUDA device on this machine"
    )


@pytest.mark.slow
def test_cases_marked_instructions_are_left_out_of_timed_runs_only(suite_project):
    suite_project.makepyfile(
        test_counted="""
        import pytest

        @pytest.mark.instructions
        def test_counted(benchmark):
            benchmark(len, "abc")
        """
    )
    timed = run(suite_project, "--collect-only", "-q", "-p", "no:xdist")
    timed.stdout.fnmatch_lines(["*test_work*", "*1 deselected*"])
    timed.stdout.no_fnmatch_line("*::test_counted")
    counted = run(suite_project, "--collect-only", "-q", "--perf-measure=instructions")
    counted.stdout.fnmatch_lines(["test_counted.py::test_counted"])
