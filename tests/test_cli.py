"""The perfgate command line on the run fixtures of tests/data (see make_fixtures.py): three runs
of one H100 key (0003 has another torch, flash-fp16 twice as slow, math-fp16 dropped and an
mxint8_fused Linear added) and one CPU run."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate import profiling
from perfgate.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
BASELINES = DATA / "baselines"
KEY = "NVIDIA-H100-80GB-HBM3"
FOLDER = BASELINES / KEY / "Linux-CPython-3.12-64bit"
CPU_RUN = DATA / "cpu-run.json"
WHERE = ["--baselines", str(BASELINES), "--hardware", KEY]
SLOWER = "test_attention[cuda-32x8x128x64-flash-fp16]"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def perfgate(*args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def table_rows(text: str) -> list[str]:
    """Rows of the plain-text table: the lines after the dashed rule, up to a blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
    return lines[start : lines.index("", start)]


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert path.stat().st_size > 10_000, f"{path} is suspiciously small"


def fixture_median(name: str, run: Path) -> float:
    benchmarks = json.loads(run.read_text())["benchmarks"]
    return next(b["stats"]["median"] for b in benchmarks if b["name"] == name)


# --- compare -----------------------------------------------------------------------------------
def test_compare_defaults_to_the_newest_two_runs_and_sorts_by_severity():
    status, out, _ = perfgate("compare", *WHERE)
    assert status == 0
    assert re.search(r"^A: .*0002_rerun\.json", out, re.M)
    assert re.search(r"^B: .*0003_torch-2\.12\.json", out, re.M)
    assert "environment changed: torch 2.11.0+cu130 -> 2.12.0+cu130" in out
    rows = table_rows(out)
    assert rows[0].startswith(SLOWER) and rows[0].endswith("regression"), rows[0]
    assert re.search(r"\+(99|100|101)\.\d %", rows[0]), rows[0]
    assert rows[-2].startswith("test_attention[cuda-32x8x128x64-math-fp16]")
    assert rows[-2].endswith("only in A")
    assert rows[-1].startswith("test_linear[cuda-4096x4096-1-mxint8_fused-bf16]")
    assert rows[-1].endswith("only in B")
    # two cold-start rounds per run: medians only, no significance
    calls = [r for r in rows if r.startswith("test_resnet18_calls")]
    assert len(calls) == 2 and all(r.endswith("n/a") for r in calls)
    assert "1 regression, 18 unchanged, 2 n/a, 1 only in A, 1 only in B" in out


def test_compare_by_run_number_and_name_fragment_same_environment():
    status, out, _ = perfgate("compare", "1", "rerun", *WHERE)
    assert status == 0
    assert "environment: same (torch 2.11.0+cu130, triton 3.6.0, cuda 13.0" in out
    assert "driver 580.159.04" in out
    verdicts = {row.split()[-1] for row in table_rows(out)}
    assert verdicts == {"unchanged", "n/a"}


def test_compare_markdown_with_glob_filter():
    status, out, _ = perfgate("compare", "0002", "0003", "--markdown", "--filter", "*sdpa*", *WHERE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("- A: ") and lines[2].startswith("- environment changed: torch")
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| benchmark | A median | B median | change | p | B/A 95% CI | verdict |"
    assert lines[lines.index(table[0]) + 1].startswith("| --- | ---: | ---: | ---: |")
    names = [row.split(" | ")[0][2:] for row in table[2:]]
    assert names[0] == SLOWER and len(names) == 6
    assert all(name.startswith("test_attention[") for name in names)


def test_compare_substring_filter_and_explicit_paths():
    first, third = FOLDER / "0001_base.json", FOLDER / "0003_torch-2.12.json"
    status, out, _ = perfgate("compare", str(first), str(third), "--filter", "dequantize")
    assert status == 0
    rows = table_rows(out)
    assert len(rows) == 5 and all(row.startswith("test_dequantize[") for row in rows)


# --- errors ------------------------------------------------------------------------------------
def test_missing_run_file_names_it_and_exits_2(tmp_path):
    missing = tmp_path / "nothere.json"
    status, out, err = perfgate("compare", str(missing), "0001", *WHERE)
    assert status == 2 and out == ""
    assert err.count("\n") == 1, err
    assert f"run file {missing} does not exist" in err


def test_corrupt_run_file_names_it_and_says_what_to_do(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"benchmarks": [')
    status, _, err = perfgate("report", str(broken), "--out", str(tmp_path / "r"))
    assert status == 2
    assert f"baseline {broken} is not valid JSON" in err
    assert "restore it from git" in err


def test_damaged_benchmark_or_bad_rounds_name_the_file(tmp_path):
    rerun = str(FOLDER / "0002_rerun.json")
    run = json.loads((FOLDER / "0001_base.json").read_text())
    run["benchmarks"][0]["stats"]["data"][0] = 0.0  # a zero-second round: a broken timer
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(run))
    status, _, err = perfgate("compare", str(zero), rerun)
    assert status == 2
    assert f"test_resnet18_steady[cuda-1-eager] in {zero}" in err and "positive" in err
    del run["benchmarks"][1]["stats"]
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(run))
    status, _, err = perfgate("compare", str(damaged), rerun)
    assert status == 2
    assert f"run {damaged}: benchmarks[1] has no name or no stats.median" in err


def test_unknown_or_ambiguous_run_lists_the_saved_runs():
    status, _, err = perfgate("compare", "0042", "0001", *WHERE)
    assert status == 2
    assert "no run '0042'" in err and "0003_torch-2.12.json" in err
    status, _, err = perfgate("compare", "r", "0001", *WHERE)  # rerun, torch-2.12
    assert status == 2 and "'r' names several runs" in err


def test_no_runs_for_the_hardware_suggests_the_folders_there():
    status, _, err = perfgate("compare", "--baselines", str(BASELINES), "--hardware", "NO-GPU")
    assert status == 2
    assert "no saved runs in" in err and "NO-GPU" in err
    assert f"available: {KEY}" in err and "--benchmark-save" in err


def test_compare_needs_two_runs(tmp_path):
    folder = tmp_path / "ONE" / "machine"
    folder.mkdir(parents=True)
    (folder / "0001_only.json").write_text((FOLDER / "0001_base.json").read_text())
    status, _, err = perfgate("compare", "--baselines", str(tmp_path), "--hardware", "ONE")
    assert status == 2 and "only 1 saved run" in err


# --- history -----------------------------------------------------------------------------------
def test_history_table_marks_the_environment_change_and_writes_a_plot(tmp_path):
    status, out, err = perfgate("history", "flash-fp16", "--out", str(tmp_path), *WHERE)
    assert status == 0
    assert f"reading 3 runs from {BASELINES / KEY}" in err
    rows = table_rows(out)
    assert [row.split()[0] for row in rows] == [
        "0001_base.json",
        "0002_rerun.json",
        "0003_torch-2.12.json",
    ]
    assert "* torch 2.11.0+cu130 -> 2.12.0+cu130" in rows[2]
    assert re.search(r"\+(99|100|101)\.\d %", rows[2])
    assert "*" not in rows[1]
    plots = list(tmp_path.glob("history_*.png"))
    assert [p.name for p in plots] == [f"history_{SLOWER.replace('[', '-').rstrip(']')}.png"]
    assert_png(plots[0])


def test_history_of_several_benchmarks_bounds_the_plots(tmp_path):
    args = ["history", "test_attention", "--out", str(tmp_path), "--max-plots", "2", "--markdown"]
    status, out, _ = perfgate(*args, *WHERE)
    assert status == 0
    assert out.count("## perf_tests/test_sdpa.py::test_attention[") == 6
    assert len(list(tmp_path.glob("*.png"))) == 2
    assert "4 more benchmarks matched and were not plotted" in out
    math_row = [line for line in out.splitlines() if "not measured" in line]
    assert len(math_row) == 1 and math_row[0].startswith("| 0003_torch-2.12.json |")


def test_history_without_a_match_says_so(tmp_path):
    status, out, _ = perfgate("history", "no_such_bench", "--out", str(tmp_path), *WHERE)
    assert status == 0 and "no benchmark matches 'no_such_bench' in 3 runs" in out
    assert not list(tmp_path.glob("*.png"))


# --- report ------------------------------------------------------------------------------------
def test_report_answers_the_lab_questions_with_plots(tmp_path):
    status, out, err = perfgate("report", "0003", str(CPU_RUN), "--out", str(tmp_path), *WHERE)
    assert status == 0, err
    assert "reading 2 runs" in err and "plotting" in err
    report = (tmp_path / "report.md").read_text()
    for heading in ("## Runs", "## 1. torch.compile", "## 2. Kernel fusion", "### 3a.", "### 3b."):
        assert heading in report
    run = FOLDER / "0003_torch-2.12.json"
    eager = fixture_median("test_resnet18_steady[cuda-128-eager]", run)
    compiled = fixture_median("test_resnet18_steady[cuda-128-compiled]", run)
    assert f"| {eager / compiled:.2f}x |" in report  # steady-state speedup, from the medians
    assert "pays for itself after about 1,864 calls" in report  # extra_info break_even_calls
    assert "not reached within the 200 calls measured" in report  # CPU: break-even beyond 200
    assert "| mxint8_fused (time / dense) |" in report  # a new implementation, found in the JSON
    assert "4.3" in report.split("CuTe kernel of mase-cuda")[1][:200]  # 2.76 / 0.64 TB/s
    assert "At most 78.4 % x 74.2 % = 58.2 % can be saved persistently" in report
    assert "| mxint8 | " in report and "not measured" in report  # CPU has no CUDA peak
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == [
        "compile_cold_start.png",
        "dequant_AMD-EPYC-2cores-cpu.png",
        f"dequant_{KEY}-cuda.png",
        "encoder_memory.png",
        "sdpa_AMD-EPYC-2cores-cpu.png",
        f"sdpa_{KEY}-cuda.png",
    ]
    for name in pngs:
        assert_png(tmp_path / name)
        assert f"]({name})" in report
    assert f"wrote {tmp_path / 'report.md'} and 6 plots" in out


def test_report_omits_what_a_run_did_not_measure(tmp_path):
    run = json.loads(CPU_RUN.read_text())
    run["benchmarks"] = [b for b in run["benchmarks"] if b["name"].startswith("test_attention")]
    only_sdpa = tmp_path / "sdpa-only.json"
    only_sdpa.write_text(json.dumps(run))
    status, _, _ = perfgate("report", str(only_sdpa), "--out", str(tmp_path), "--no-plots")
    assert status == 0
    report = (tmp_path / "report.md").read_text()
    assert "## 1. torch.compile\n\nNot measured in these runs." in report
    assert "## 3. Custom kernel: MXINT8 weights\n\nNot measured in these runs." in report
    assert "| naive | flash | math |" in report and "cudnn" not in report
    assert "![" not in report and not list(tmp_path.glob("*.png"))


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    status, _, err = perfgate("report", str(CPU_RUN), "--out", str(tmp_path))
    assert status == 2
    assert "pip install matplotlib" in err and "--no-plots" in err


# --- help and entry points ---------------------------------------------------------------------
@pytest.mark.parametrize("command", ["compare", "history", "report", "profile"])
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert "examples:" in help_text and f"perfgate {command}" in help_text


def test_python_dash_m_perfgate_runs_the_command_line():
    result = subprocess.run(
        [sys.executable, "-m", "perfgate", "compare", "--markdown", *WHERE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"| {SLOWER} | " in result.stdout


# --- profile -----------------------------------------------------------------------------------
class FakePytest:
    """Stands in for subprocess.Popen: records the command, writes what --perf-profile would."""

    commands: list[list[str]] = []
    returncode = 0
    writes = True

    def __init__(self, command, **kwargs):
        FakePytest.commands.append(command)
        folder = Path(command[command.index("--perf-profile") + 1])
        if FakePytest.writes:
            stem = folder / "test_attention_cpu-32x8x128x64-naive-fp32_"
            Path(f"{stem}.txt").write_text("Name  Self CPU\naten::bmm  60.0%\naten::_softmax\n")
            Path(f"{stem}.trace.json").write_text("{}")
        self.stdout = io.StringIO("collected 1 item\n1 passed in 0.5s\n")

    def wait(self) -> int:
        return FakePytest.returncode


@pytest.fixture
def fake_pytest(monkeypatch):
    FakePytest.commands, FakePytest.returncode, FakePytest.writes = [], 0, True
    monkeypatch.setattr(profiling.subprocess, "Popen", FakePytest)
    return FakePytest


def test_profile_streams_pytest_then_prints_tables_and_traces(tmp_path, fake_pytest):
    test_id = "perf_tests/test_sdpa.py::test_attention[cpu-32x8x128x64-naive-fp32]"
    status, out, err = perfgate("profile", test_id, "--out", str(tmp_path), "--", "-k", "naive")
    assert status == 0
    (command,) = fake_pytest.commands
    assert command[:4] == [sys.executable, "-m", "pytest", test_id]
    assert command[4:] == [
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--perf-profile",
        str(tmp_path),
        "-k",
        "naive",
    ]
    assert "running: " in err
    assert out.index("1 passed") < out.index("aten::bmm")
    assert "aten::_softmax" in out
    assert "Chrome trace: " in out and out.rstrip().endswith(
        "(open in https://ui.perfetto.dev or chrome://tracing)"
    )


def test_profile_returns_pytest_status_and_explains_an_empty_result(tmp_path, fake_pytest):
    fake_pytest.returncode, fake_pytest.writes = 5, False
    status, _, err = perfgate("profile", "perf_tests/test_sdpa.py::nothing", "--out", str(tmp_path))
    assert status == 5
    assert "no test matched TEST_ID" in err


PLUGIN_HAS_PROFILE = "--perf-profile" in (ROOT / "perfgate/plugin.py").read_text()


@pytest.mark.slow
@pytest.mark.skipif(
    not PLUGIN_HAS_PROFILE,
    reason="the plugin option --perf-profile (perfgate/plugin.py, the lead's) is not there yet",
)
def test_profile_end_to_end_on_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    test_id = "perf_tests/test_sdpa.py::test_attention[cpu-32x8x128x64-naive-fp32]"
    status, out, err = perfgate("profile", test_id, "--out", str(tmp_path))
    assert status == 0, out + err
    tables = list(tmp_path.glob("*.txt"))
    assert len(tables) == 1 and list(tmp_path.glob("*.trace.json"))
    assert "aten::bmm" in tables[0].read_text() and "aten::bmm" in out
