"""End-to-end tests of the perfgate pytest plugin with pytester: the store, compare, the gate, and
every way the gate can fail to run (one line, exit 6, never a green run that gated nothing)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest
from helpers import (
    BENCHMARK,
    PLUGINS,
    assert_cannot_gate,
    children_import_this_checkout,
    report_verdicts,
    run,
    saved_runs,
)


# --- the store --------------------------------------------------------------------------------
def test_compare_without_baseline_says_how_to_record_one_and_passes(bench_project):
    result = run(bench_project, "--benchmark-compare", "--benchmark-compare-fail=median:10%")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no baseline for this hardware*--benchmark-save=NAME*"])


def test_saving_twice_keeps_both_runs_under_the_hardware_key(bench_project):
    assert run(bench_project, "--benchmark-save=first").ret == 0
    assert run(bench_project, "--benchmark-save=second").ret == 0
    runs = saved_runs(bench_project)
    assert [p.name for p in runs] == ["0001_first.json", "0002_second.json"]
    saved = json.loads(runs[0].read_text())
    assert len(saved["benchmarks"][0]["stats"]["data"]) == 20  # per-round data is kept
    assert saved["machine_info"]["perfgate"]["hardware_key"] == runs[0].parent.parent.name


def test_corrupt_baseline_is_an_error_naming_the_file(bench_project):
    assert run(bench_project, "--benchmark-save=good").ret == 0
    corrupt = saved_runs(bench_project)[0].with_name("0002_truncated.json")
    corrupt.write_text('{"benchmarks": [')
    result = run(bench_project, "--benchmark-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*0002_truncated.json is not valid JSON*"])


@pytest.mark.parametrize("failure", ["raise AssertionError('boom')", "raise KeyboardInterrupt"])
def test_a_session_that_does_not_finish_cleanly_never_becomes_a_baseline(bench_project, failure):
    bench_project.makepyfile(test_zz_broken=f"def test_broken(benchmark):\n    {failure}\n")
    result = run(bench_project, "--benchmark-save=partial")
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    assert saved_runs(bench_project) == []
    result.stdout.fnmatch_lines(["*NOT saved as a baseline*perfgate-results/unsaved/*partial*"])
    assert list((bench_project.path / "perfgate-results" / "unsaved").glob("*_partial.json"))


def test_saving_while_gating_warns_that_it_is_the_next_baseline(bench_project):
    assert run(bench_project, "--benchmark-save=base").ret == 0
    result = run(bench_project, "--perf-gate", "--benchmark-save=next")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*0002_next.json is now the newest baseline*"])


def test_saving_under_another_key_than_the_compared_run_warns(bench_project, tmp_path):
    other = tmp_path / "elsewhere" / "GPU-X" / "m"
    other.mkdir(parents=True)
    assert run(bench_project, "--benchmark-save=base").ret == 0
    foreign = json.loads(saved_runs(bench_project)[0].read_text())
    foreign["machine_info"]["perfgate"]["hardware_key"] = "GPU-X"
    (other / "0001_gpu.json").write_text(json.dumps(foreign))
    result = run(bench_project, f"--benchmark-compare={other / '0001_gpu.json'}",
                 "--benchmark-save=mine")  # fmt: skip
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*warning: saved under*but compared with a run of GPU-X*"])


def test_missing_perf_baselines_folder_is_an_error_unless_saving(bench_project, tmp_path):
    missing = tmp_path / "nowhere"
    result = run(bench_project, f"--perf-baselines={missing}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--perf-baselines {missing} does not exist*"])
    assert run(bench_project, f"--perf-baselines={missing}", "--benchmark-save=x").ret == 0
    assert list(missing.rglob("0001_x.json"))


# --- the gate ---------------------------------------------------------------------------------
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
    verdicts = report_verdicts(bench_project.path / "perfgate-results" / "gate.json")
    assert verdicts == {"test_bench.py::test_work": "regression"}

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    unchanged = run(bench_project, "--perf-gate")
    output = unchanged.stdout.str()
    assert unchanged.ret == 0, output
    assert "comparing with" in output and "0001_baseline.json" in output
    assert "1 gated" in output and "Confirmed regressions" not in output


def test_gate_and_compare_give_the_same_verdict(bench_project, monkeypatch):
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")
    result = run(bench_project, "--perf-gate", "--benchmark-json=now.json",
                 "--perf-gate-threshold=0.9")  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    gate = report_verdicts(bench_project.path / "perfgate-results" / "gate.json")
    children_import_this_checkout(monkeypatch)  # python -m perfgate outside the checkout
    compare = bench_project.run(
        sys.executable, "-m", "perfgate", "compare", str(saved_runs(bench_project)[0]),
        str(bench_project.path / "now.json"), "--json", "--threshold=90%",
    )  # fmt: skip
    assert compare.ret == 0, compare.stderr.str()
    by_compare = {row["name"]: row["verdict"] for row in json.loads(compare.stdout.str())["rows"]}
    assert gate == by_compare


@pytest.mark.slow
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
    saved = json.loads(saved_runs(bench_project)[0].read_text())
    assert saved["benchmarks"][0]["extra_info"]["perfgate"] == {"threshold": 0.9}


def test_threshold_names_match_any_case(bench_project):
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    assert run(bench_project, "--perf-gate", "--perf-gate-threshold=TEST_WORK=0.5").ret == 0


def test_bad_gate_threshold_is_a_usage_error(bench_project):
    result = run(bench_project, "--perf-gate", "--perf-gate-threshold=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-gate-threshold: threshold 'fast'*NAME=FRACTION*"])


# --- the gate cannot run: exit 6, one line ----------------------------------------------------
def test_gate_without_baseline_names_the_keys_that_exist(bench_project):
    (bench_project.path / "baselines" / "GPU-Y" / "m").mkdir(parents=True)
    assert run(bench_project, "--perf-baselines=baselines", "--benchmark-save=x").ret == 0
    for saved in saved_runs(bench_project):
        saved.rename(bench_project.path / "baselines" / "GPU-Y" / "m" / saved.name)
    (bench_project.path / "ran").unlink()
    assert_cannot_gate(run(bench_project, "--perf-gate"), "no baseline for this hardware",
                       "keys with runs there: GPU-Y")  # fmt: skip
    assert not (bench_project.path / "ran").exists()  # failed before running anything


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--benchmark-compare=9999"], "no run '9999'"),
        (["-k", "nothing_matches"], "none of the 0 selected benchmarks is in the baseline"),
        (["--perf-gate-threshold=sdpaa=0.5"], "names no family or test here: sdpaa"),
        (["--benchmark-disable"], "benchmarks are not timed here"),
    ],
)
def test_gate_that_would_compare_nothing_fails_before_running(bench_project, args, line):
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    (bench_project.path / "ran").unlink()
    assert_cannot_gate(run(bench_project, "--perf-gate", *args), line)
    assert not (bench_project.path / "ran").exists()


def test_gate_fails_when_every_benchmark_skipped(bench_project):
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    bench_project.makepyfile(
        test_bench=BENCHMARK.replace("    Path(", "    import pytest; pytest.skip('no')\n    Path(")
    )
    assert_cannot_gate(run(bench_project, "--perf-gate"), "nothing was gated")


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ('{"benchmarks": [', "is not valid JSON"),
        (b"\xff\xfe", "is not UTF-8 text"),
        ('{"benchmarks": [{}]}', "benchmarks[0] has no name, fullname or stats"),
        ("no-data", "has no per-round data, so it cannot be compared"),
        ("negative", "stats.data must be a list of positive seconds"),
    ],
)
def test_a_broken_member_of_the_baseline_set_fails_before_running(bench_project, content, line):
    assert run(bench_project, "--benchmark-save=base").ret == 0
    assert run(bench_project, "--benchmark-save=base").ret == 0
    older = saved_runs(bench_project)[0]  # the set's older member, not the newest run
    data = json.loads(older.read_text())
    if content in ("no-data", "negative"):
        data["benchmarks"][0]["stats"]["data"] = [] if content == "no-data" else [1e-3, -1.0]
        older.write_text(json.dumps(data))
    elif isinstance(content, bytes):
        older.write_bytes(content)
    else:
        older.write_text(content)
    (bench_project.path / "ran").unlink()
    assert_cannot_gate(run(bench_project, "--perf-gate"), line, older.name)
    assert not (bench_project.path / "ran").exists()


# --- runs anywhere ----------------------------------------------------------------------------
def test_gate_runs_from_a_subdirectory_and_with_baselines_elsewhere(
    bench_project, tmp_path, monkeypatch
):
    (bench_project.path / "conftest.py").write_text("")
    assert run(bench_project, "--benchmark-save=baseline").ret == 0
    monkeypatch.chdir(bench_project.mkdir("sub"))
    # the virtual clock is imported while options are parsed, before any conftest
    monkeypatch.setenv("PYTHONPATH", f"{bench_project.path}:{os.environ.get('PYTHONPATH', '')}")
    result = bench_project.run(
        sys.executable, "-m", "pytest", *PLUGINS, "--benchmark-timer=virtual_clock.clock",
        "--perf-gate", str(bench_project.path / "test_bench.py"),
    )  # fmt: skip
    monkeypatch.chdir(bench_project.path)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    elsewhere = tmp_path / "store"
    (bench_project.path / "baselines").rename(elsewhere)
    result = run(bench_project, f"--perf-baselines={elsewhere}", "--perf-gate")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_histogram_needs_pygal_or_says_so(bench_project):
    result = run(bench_project, "--benchmark-histogram=hist")
    output = result.stdout.str() + result.stderr.str()
    # not imported here: pygal's import hook breaks later in-process pytest runs' plugin loading
    if importlib.util.find_spec("pygal") is None:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "--benchmark-histogram needs pygal" in output
    else:
        assert result.ret == 0, output
        assert list(bench_project.path.glob("hist*.svg"))
