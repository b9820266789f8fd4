"""Output paths checked before any work: a report path that cannot be written is one line and a
usage error before the first benchmark (pytest exit 4, ``perfgate`` exit 2), never a traceback
at the end of a long run."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import PLUGINS, assert_one_line, full_disk, perfgate, run

from perfgate.store.saving import SAVE_FAILED


@pytest.fixture
def bad_paths(tmp_path: Path) -> dict[str, Path]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    (tmp_path / "a-folder").mkdir()
    return {"folder": tmp_path / "a-folder", "under a file": a_file / "gate.md",
            "its own JSON twin": tmp_path / "gate.json"}  # fmt: skip


@pytest.mark.parametrize("kind", ["folder", "under a file", "read-only", "its own JSON twin"])
def test_a_gate_report_that_cannot_be_written_stops_before_the_first_benchmark(
    bench_project,  # noqa: F811
    bad_paths,
    request,
    kind,
):
    if kind == "read-only":
        path = request.getfixturevalue("read_only_disk") / "gate.md"
    else:
        path = bad_paths[kind]
    result = run(bench_project, "--perf-gate", f"--perf-gate-report={path}")
    assert_one_line(result, pytest.ExitCode.USAGE_ERROR, "--perf-gate-report")
    assert not (bench_project.path / "ran").exists()


def test_benchmark_json_into_a_missing_folder_is_written(bench_project):  # noqa: F811
    result = run(bench_project, "--benchmark-json=new/folder/run.json")
    assert result.ret == 0, result.stdout.str()
    assert (bench_project.path / "new" / "folder" / "run.json").is_file()


def test_benchmark_json_under_a_file_stops_before_the_first_benchmark(
    bench_project,  # noqa: F811
    bad_paths,
):
    result = run(bench_project, f"--benchmark-json={bad_paths['under a file']}")
    assert_one_line(result, pytest.ExitCode.USAGE_ERROR, "--benchmark-json")
    assert not (bench_project.path / "ran").exists()


COMMANDS = {
    "dashboard": ["dashboard", "--baselines", "nowhere"],
    "history": ["history", "x", "--baselines", "nowhere", "--hardware", "K"],
    "profile": ["profile", "perf_tests/test_sdpa.py::test_attention"],
    "bisect": ["bisect", "HEAD~1", "HEAD", "-k", "x"],
    "ab": ["ab", "HEAD"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["wrong kind", "under a file", "read-only"])
def test_every_out_that_cannot_be_written_is_one_line_and_exit_2(
    command,
    kind,
    bad_paths,
    request,
):
    if kind == "read-only":
        out = request.getfixturevalue("read_only_disk") / "out"
    elif kind == "wrong kind":
        out = bad_paths["folder"] if command == "ab" else bad_paths["under a file"].parent
    else:
        out = bad_paths["under a file"]
    status, _, err = perfgate(*COMMANDS[command], "--out", str(out))
    assert status == 2 and err.count("\n") == 1 and "--out" in err, err


def test_an_empty_summary_is_said_and_skipped(tmp_path, monkeypatch):
    from helpers import write_history

    pytest.importorskip("plotly")
    write_history(tmp_path / "baselines", runs=4, step_at=2)
    night = next((tmp_path / "baselines").rglob("0004_*.json"))
    status, _, err = perfgate("dashboard", "--out", str(tmp_path / "site"), "--baselines",
                              str(tmp_path / "baselines"), str(night), "--summary", "")  # fmt: skip
    assert status == 0 and "--summary is empty" in err
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize("test_id", ["bad_id", "perf_tests/test_nothing.py::test_x"])
def test_profile_of_a_bad_id_blames_the_id(tmp_path, test_id):
    status, _, err = perfgate("profile", test_id, "--out", str(tmp_path))
    assert status == 2 and err.count("\n") == 1 and f"TEST_ID '{test_id}'" in err, err
    assert "--perf-profile" not in err


def test_benchmark_json_opened_by_an_older_pytest_benchmark_is_taken_as_it_is(tmp_path):
    # pytest-benchmark before 5.3 (the H100's 5.1) opens --benchmark-json itself (FileType): the
    # check found a BufferedWriter and raised INTERNALERROR on the GPU before this
    from types import SimpleNamespace

    from perfgate.options import Options
    from perfgate.session import outputs

    with open(tmp_path / "run.json", "wb") as opened:
        config = SimpleNamespace(option=SimpleNamespace(benchmark_json=opened))
        outputs.check_session_outputs(config, Options())  # no error: open for writing


def test_a_full_disk_under_benchmark_json_is_one_line_and_keeps_the_file(
    bench_project,  # noqa: F811
    monkeypatch,
):
    """pytest-benchmark's own save_json wrote half a file and raised INTERNALERROR."""
    out = bench_project.path / "out"
    out.mkdir()
    (out / "run.json").write_text("last night's run\n")
    full_disk(monkeypatch, out)
    monkeypatch.syspath_prepend(bench_project.path)  # its virtual clock, in this process
    clock = "--benchmark-timer=virtual_clock.clock"
    result = bench_project.runpytest_inprocess(*PLUGINS, clock, "--benchmark-json=out/run.json")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == SAVE_FAILED, text
    assert "INTERNALERROR" not in text and "Traceback" not in text
    result.stdout.fnmatch_lines(["perfgate: --benchmark-json *run.json NOT written: could not "
                                 "write the run: No space left on device*"])  # fmt: skip
    assert (out / "run.json").read_text() == "last night's run\n"
    assert [p.name for p in out.iterdir()] == ["run.json"]
