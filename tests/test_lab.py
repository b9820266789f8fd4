"""The lab report (``python -m lab``, ``tox -e report``): the lab handout's questions answered
from this suite's runs, on the run fixtures of tests/data (see make_fixtures.py): three runs of one
H100 key (0003 has another torch, flash-fp16 twice as slow, math-fp16 dropped and an mxint8_fused
Linear added) and one CPU run."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from helpers import assert_png

import lab.__main__ as lab_command

DATA = Path(__file__).resolve().parent / "data"
KEY = "NVIDIA-H100-80GB-HBM3"
FOLDER = DATA / "baselines" / KEY / "Linux-CPython-3.12-64bit"
CPU_RUN = DATA / "cpu-run.json"


def lab(*args: str) -> tuple[int, str, str]:
    """Run ``python -m lab ARGS`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    status = lab_command.main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def error_line(err: str) -> str:
    """The one error line of ``err``; anything else there is a progress line."""
    lines = [line for line in err.splitlines() if not line.startswith(("reading ", "plotting "))]
    assert len(lines) == 1 and lines[0].startswith("lab report: error: "), err
    assert "Traceback" not in err
    return lines[0]


def fixture_median(name: str, run: Path) -> float:
    benchmarks = json.loads(run.read_text())["benchmarks"]
    return next(b["stats"]["median"] for b in benchmarks if b["name"] == name)


def test_corrupt_or_non_utf8_run_file_names_it_and_says_what_to_do(tmp_path):
    broken = tmp_path / "broken.json"
    for content, problem in ((b'{"benchmarks": [', "is not valid JSON"), (b"\xff{}", "UTF-8")):
        broken.write_bytes(content)
        status, out, err = lab(str(broken), "--out", str(tmp_path / "r"))
        line = error_line(err)
        assert (status, out) == (2, "")
        assert f"run {broken} " in line and problem in line and "write it again" in line


def test_report_answers_the_lab_questions_with_plots(tmp_path):
    run = FOLDER / "0003_torch-2.12.json"
    status, out, err = lab(str(run), str(CPU_RUN), "--out", str(tmp_path))
    assert status == 0, err
    assert "plotting" in err
    report = (tmp_path / "report.md").read_text()
    runs = report.split("## Runs")[1].split("## ")[0]
    assert [line.split(" | ")[1] for line in runs.splitlines() if line.startswith("| ")][2:] == [
        "0003_torch-2.12.json", "cpu-run.json"]  # fmt: skip
    for heading in ("## Runs", "## 1. torch.compile", "## 2. Kernel fusion", "### 3a.", "### 3b."):
        assert heading in report
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
    status, _, _ = lab(str(only_sdpa), "--out", str(tmp_path), "--no-plots")
    assert status == 0
    report = (tmp_path / "report.md").read_text()
    assert "## 1. torch.compile\n\nNot measured in these runs." in report
    assert "## 3. Custom kernel: MXINT8 weights\n\nNot measured in these runs." in report
    assert "| naive | flash | math |" in report and "cudnn" not in report
    assert "![" not in report and not list(tmp_path.glob("*.png"))


def test_report_of_another_projects_run_says_it_is_the_labs_in_one_line(tmp_path):
    run = json.loads(CPU_RUN.read_text())
    for benchmark in run["benchmarks"]:
        for key in ("name", "fullname"):  # their own tests, in their own folder
            benchmark[key] = benchmark[key].replace("test_", "test_their_")
    theirs = tmp_path / "0001_theirs.json"
    theirs.write_text(json.dumps(run))
    status, _, err = lab(str(theirs), "--out", str(tmp_path), "--no-plots")
    assert status == 2 and not (tmp_path / "report.md").exists()
    assert "this repository's lab questions" in err and "perfgate compare" in err


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    status, _, err = lab(str(CPU_RUN), "--out", str(tmp_path))
    assert status == 2
    assert "pip install matplotlib" in err and "--no-plots" in err


def test_out_naming_an_existing_file_is_refused_and_the_file_kept(tmp_path):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    status, out, err = lab(str(CPU_RUN), "--out", str(existing))
    assert (status, out) == (2, "")
    assert f"--out {existing} is a file, not a folder" in error_line(err)
    assert existing.read_text() == "mine"
