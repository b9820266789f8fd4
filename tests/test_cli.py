"""perfgate history and profile, help and ``python -m perfgate``, on the run fixtures of
tests/data (see make_fixtures.py): three runs of one H100 key (0003 has another torch, flash-fp16
twice as slow, math-fp16 dropped and an mxint8_fused Linear added) and one CPU run. ``perfgate
compare`` is tested in test_cli_compare.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import assert_png, error_line, perfgate

from perfgate.cli import COMMANDS, main, profile
from perfgate.format import markdown

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
BASELINES = DATA / "baselines"
KEY = "NVIDIA-H100-80GB-HBM3"
FOLDER = BASELINES / KEY / "Linux-CPython-3.12-64bit"
CPU_RUN = DATA / "cpu-run.json"
WHERE = ["--baselines", str(BASELINES), "--hardware", KEY]
SLOWER = "test_attention[cuda-32x8x128x64-flash-fp16]"


def table_rows(text: str) -> list[str]:
    """Rows of the plain-text table: the lines after the dashed rule, up to a blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
    return lines[start : lines.index("", start)]


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [["history", "flash"], ["profile", "perf_tests::test_x"]],
)
def test_out_naming_an_existing_file_is_refused_and_the_file_kept(tmp_path, command):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine")
    where = WHERE if command[0] != "profile" else []
    status, out, err = perfgate(*command, "--out", str(existing), *where)
    assert (status, out) == (2, "")
    line = error_line(err, command[0])
    assert f"--out {existing} is a file, not a folder" in line
    assert existing.read_text() == "mine"


# --- history -----------------------------------------------------------------------------------
def test_history_table_marks_the_environment_change_and_writes_a_plot(tmp_path):
    status, out, err = perfgate("history", "flash-fp16", "--out", str(tmp_path), *WHERE)
    assert status == 0
    assert f"reading runs from {BASELINES / KEY}" in err
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
    (stem,) = [p.stem for p in plots]  # the test's id, readable, and a hash of its full id
    assert re.fullmatch(
        rf"history_{re.escape(SLOWER.replace('[', '-').rstrip(']'))}-[0-9a-f]{{8}}", stem
    )
    assert_png(plots[0])


def test_history_of_several_benchmarks_bounds_the_plots(tmp_path):
    args = ["history", "test_attention", "--out", str(tmp_path), "--max-plots", "2", "--markdown"]
    status, out, _ = perfgate(*args, *WHERE)
    assert status == 0
    assert out.count(r"## perf_tests/test_sdpa.py::test_attention\[") == 6
    assert len(list(tmp_path.glob("*.png"))) == 2
    assert "4 more benchmarks matched and were not plotted" in out
    math_row = [line for line in out.splitlines() if "not measured" in line]
    assert len(math_row) == 1 and math_row[0].startswith("| 0003_torch-2.12.json |")


def test_history_without_a_match_says_so(tmp_path):
    for plots in ([], ["--no-plots"]):
        status, _, err = perfgate(
            "history", "no_such_bench", "--out", str(tmp_path), *WHERE, *plots
        )
        assert status == 2 and "no benchmark matches 'no_such_bench' in 3 runs" in err
    assert not list(tmp_path.glob("*.png"))


def test_history_without_matplotlib_prints_its_table_and_says_why_there_is_no_plot(
    tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # installed without perfgate[report]
    status, out, err = perfgate("history", "flash-fp16", "--out", str(tmp_path), *WHERE)
    assert status == 0, err
    assert [row.split()[0] for row in table_rows(out)][-1] == "0003_torch-2.12.json"
    assert "no plots: matplotlib is not installed" in err and "Traceback" not in err
    assert not list(tmp_path.glob("*.png"))


# --- help and entry points ---------------------------------------------------------------------
@pytest.mark.parametrize("command", [command.name for command in COMMANDS])
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
    assert f"| {markdown(SLOWER)} | " in result.stdout


# --- profile -----------------------------------------------------------------------------------
# A real subprocess in place of pytest: it prints as pytest would, writes one table and one trace
# into the folder it is given, and exits with the status asked for. run_profile runs it, streams
# its output, finds what it wrote (not what was there before) and prints it.
PROFILED = """
import sys
from pathlib import Path
folder, status = Path(sys.argv[1]), int(sys.argv[2])
print("collected 1 item", flush=True)
if status == 0:
    (folder / "case_naive.txt").write_text("Name  Self CPU\\naten::bmm  60.0%\\n")
    (folder / "case_naive.trace.json").write_text("{}")
print("1 passed" if status == 0 else "no tests ran", flush=True)
sys.exit(status)
"""


@pytest.fixture
def profiled(monkeypatch):
    """Replace the pytest command by PROFILED; records the pytest command it replaced."""
    state, real_command = SimpleNamespace(commands=[], status=0), profile.profile_argv

    def command(test_id, folder, extra=()):
        state.commands.append(real_command(test_id, folder, extra))
        return [sys.executable, "-c", PROFILED, str(folder), str(state.status)]

    monkeypatch.setattr(profile, "profile_argv", command)
    monkeypatch.chdir(ROOT)  # the test ids name files of perf_tests/
    return state


def test_profile_command_line_passes_the_test_id_folder_and_extra_arguments(tmp_path, profiled):
    test_id = "perf_tests/test_sdpa.py::test_attention[cpu-32x8x128x64-naive-fp32]"
    status, _, err = perfgate("profile", test_id, "--out", str(tmp_path), "--", "-k", "naive")
    assert status == 0
    (command,) = profiled.commands
    assert command[:4] == [sys.executable, "-m", "pytest", test_id]
    assert command[4:] == ["-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--perf-profile", str(tmp_path), "-k", "naive"]  # fmt: skip
    assert err.startswith("running: ")  # the command line it runs, before its output


def test_profile_streams_the_run_then_prints_only_what_it_wrote(tmp_path, profiled):
    stale = tmp_path / "older_case.txt"
    stale.write_text("aten::stale_table_from_an_earlier_run\n")
    status, out, _ = perfgate("profile", "perf_tests/test_sdpa.py::test_y", "--out", str(tmp_path))
    assert status == 0
    assert out.index("collected 1 item") < out.index("1 passed") < out.index("aten::bmm")
    assert f"=== {tmp_path / 'case_naive.txt'}" in out
    assert "stale_table" not in out  # in the folder before the run: not this run's profile
    trace = tmp_path / "case_naive.trace.json"
    assert out.rstrip().splitlines()[-1] == (
        f"Chrome trace: {trace} (open in https://ui.perfetto.dev or chrome://tracing)"
    )


def test_profile_returns_pytest_status_and_explains_an_empty_result(tmp_path, profiled):
    profiled.status = 5  # pytest's "no tests collected"
    status, out, err = perfgate(
        "profile", "perf_tests/test_sdpa.py::nothing", "--out", str(tmp_path)
    )
    assert status == 5
    assert "no tests ran" in out and "Chrome trace" not in out
    assert "perfgate profile: error: no profile written: no test matched TEST_ID" in err


def test_profile_that_writes_nothing_from_a_passing_run_fails_and_says_why(tmp_path, profiled):
    profiled.status = 0
    profile_folder = tmp_path / "empty"
    with pytest.MonkeyPatch.context() as patch:  # the stand-in writes nothing into a file "folder"
        patch.setattr(profile, "_files", lambda folder: {})
        status, _, err = perfgate(
            "profile", "tests/test_cli.py::test_y", "--out", str(profile_folder)
        )
    assert status == 2
    assert "made no benchmark call to profile" in err


@pytest.mark.slow
def test_profile_end_to_end_on_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    test_id = "perf_tests/test_sdpa.py::test_attention[cpu-32x8x128x64-naive-fp32]"
    status, out, err = perfgate("profile", test_id, "--out", str(tmp_path))
    assert status == 0, out + err
    tables = list(tmp_path.glob("*.txt"))
    assert len(tables) == 1 and list(tmp_path.glob("*.trace.json"))
    assert "aten::bmm" in tables[0].read_text() and "aten::bmm" in out


def test_nightly_screen_and_target_take_the_gates_units(capsys):
    """--screen and --target parse as thresholds do (0.02 or 2%); a bare 2 is refused."""
    from perfgate.cli import build_parser

    args = build_parser().parse_args(["nightly", "--screen", "2%", "--target", "0.05"])
    assert (args.screen, args.target) == (0.02, 0.05)
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["nightly", "--target", "3"])
    assert stopped.value.code == 2
    assert "threshold '3' is ambiguous: write 3% or 0.03" in capsys.readouterr().err
