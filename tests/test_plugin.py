"""End-to-end tests of the perfgate pytest plugin with pytester: baselines, compare, the gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# A benchmark whose duration the test controls: a busy wait ends at its deadline whatever else
# the machine does, so the durations are stable even on a loaded 2-core CI machine.
BENCHMARK = """
import os, time

def work():
    deadline = time.perf_counter() + float(os.environ["PERFGATE_WORK_SECONDS"])
    while time.perf_counter() < deadline:
        pass

def test_work(benchmark):
    benchmark.pedantic(work, rounds=20, iterations=1, warmup_rounds=1)
"""


@pytest.fixture
def bench_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_bench=BENCHMARK)
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    # under pytest-xdist the inner pytest would inherit these and disable its benchmarks
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "perfgate.plugin", "-p", "no:cacheprovider", *args)


def saved_runs(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").rglob("*.json"))


def test_compare_without_baseline_says_how_to_record_one_and_passes(bench_project):
    result = run(bench_project, "--benchmark-compare", "--benchmark-compare-fail=median:10%")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no baseline for this hardware*--benchmark-save=baseline*"])


def test_saving_twice_keeps_both_runs_under_the_hardware_key(bench_project):
    assert run(bench_project, "--benchmark-save=first").ret == 0
    assert run(bench_project, "--benchmark-save=second").ret == 0
    runs = saved_runs(bench_project)
    assert [p.name for p in runs] == ["0001_first.json", "0002_second.json"]
    saved = json.loads(runs[0].read_text())
    assert len(saved["benchmarks"][0]["stats"]["data"]) == 20  # per-round data is kept
    assert saved["machine_info"]["perfgate"]["hardware_key"] == runs[0].parent.parent.name


@pytest.mark.parametrize(
    ("option", "expected"),
    [(None, "retained"), ("--perf-malloc=default", "glibc default")],
)
def test_the_host_allocator_setting_is_saved_with_the_run(bench_project, option, expected):
    args = ["--device", "cpu", "--benchmark-save=run", *([option] if option else [])]
    assert run(bench_project, *args).ret == 0
    saved = json.loads(saved_runs(bench_project)[0].read_text())
    setting = saved["machine_info"]["perfgate"]["host_malloc"]
    assert expected in setting or setting.startswith("unchanged")


def test_corrupt_baseline_is_an_error_naming_the_file(bench_project):
    assert run(bench_project, "--benchmark-save=good").ret == 0
    corrupt = saved_runs(bench_project)[0].with_name("0002_truncated.json")
    corrupt.write_text('{"benchmarks": [')
    result = run(bench_project, "--benchmark-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*0002_truncated.json is not valid JSON*"])


def test_gate_fails_a_2x_slowdown_and_passes_an_unchanged_run(bench_project, monkeypatch):
    assert run(bench_project, "--benchmark-save=baseline").ret == 0

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.004")
    slowed = run(bench_project, "--perf-gate")
    output = slowed.stdout.str()
    assert slowed.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "re-running 1 benchmarks to confirm" in output
    assert "Confirmed regressions" in output and "confirmed by re-run" in output
    report = (bench_project.path / "perfgate-results" / "gate.md").read_text()
    assert "## Confirmed regressions" in report and "test_work" in report

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    unchanged = run(bench_project, "--perf-gate")
    output = unchanged.stdout.str()
    # on a loaded CI machine a busy wait can overshoot once (then "unconfirmed"), never twice
    assert unchanged.ret == 0, output
    assert "perfgate gate against" in output and "Confirmed regressions" not in output


def test_gate_learns_the_machines_spread_from_a_baseline_set(bench_project, monkeypatch):
    # two sessions of one machine, 2 ms and 3 ms: a 3 ms run is inside the set's spread
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    result = run(bench_project, "--perf-gate")
    output = result.stdout.str()
    assert result.ret == 0, output
    assert "a set with 0001_baseline.json" in output
    # ... but the newer run alone, under another name, would not have taught it that
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    assert run(bench_project, "--benchmark-save=other").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")
    assert run(bench_project, "--perf-gate").ret == pytest.ExitCode.TESTS_FAILED


def test_gate_threshold_marker_beats_the_default(bench_project, monkeypatch):
    bench_project.makepyfile(
        test_bench=BENCHMARK.replace(
            "def test_work", "import pytest\n@pytest.mark.perfgate(threshold=0.9)\ndef test_work"
        )
    )
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")  # 50 % slower, under the 90 % marker
    assert run(bench_project, "--perf-gate").ret == 0


def test_bad_gate_threshold_is_a_usage_error(bench_project):
    result = run(bench_project, "--perf-gate", "--perf-gate-threshold=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-gate-threshold 'fast'*FAMILY=FRACTION*"])


def test_out_of_memory_skips_the_case_and_the_run_goes_on(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_oom="""
        import torch

        def test_too_large():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

        def test_next():
            pass
        """
    )
    result = run(pytester, "-rs")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*out of memory for this parameter: CUDA out of memory*", "*1 passed, 1 skipped*"]
    )
