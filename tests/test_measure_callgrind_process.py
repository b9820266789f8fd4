"""The counting process's environment is the same wherever the checkout lies and whatever the
caller's environment holds (perfgate/measure/callgrind_process.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import perfgate
from perfgate.measure import callgrind, callgrind_child, callgrind_process


def made(tmp_path: Path, root: Path, name: str) -> tuple[dict[str, str], Path]:
    scratch = tmp_path / name
    scratch.mkdir()
    return callgrind_process.environment(root, scratch), scratch


def checkout(tmp_path: Path, path: str) -> Path:
    root = tmp_path / path
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return root


def test_the_caller_s_variables_do_not_reach_the_counting_process(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_LONG_VARIABLE", "x" * 5000)
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/a/warm/cache")
    env, scratch = made(tmp_path, checkout(tmp_path, "root"), "s")
    assert "SOME_LONG_VARIABLE" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(scratch / "src")
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(scratch))
    assert env["HOME"].startswith(str(scratch)) and env["TMPDIR"].startswith(str(scratch))
    assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"


def test_an_injection_is_passed_on(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGATE_INJECT_INSTRUCTIONS", "0.01")
    monkeypatch.setenv("PERFGATE_INJECT_MATCHING", "sdpa")
    env, _ = made(tmp_path, checkout(tmp_path, "root"), "s")
    assert env["PERFGATE_INJECT_INSTRUCTIONS"] == "0.01"
    assert env["PERFGATE_INJECT_MATCHING"] == "sdpa"


def test_the_counting_process_imports_the_callers_perfgate(tmp_path):
    harness = Path(perfgate.__file__).resolve().parents[1]
    env, scratch = made(tmp_path, checkout(tmp_path, "root"), "s")  # perfgate not in root
    assert env["PYTHONPATH"].split(os.pathsep) == [str(scratch / "src"), str(scratch / "harness")]
    assert (scratch / "harness").resolve() == harness
    (tmp_path / "own").mkdir()
    env, _ = callgrind_process.environment(harness, tmp_path / "own"), None  # perfgate in root
    assert env["PYTHONPATH"] == str(tmp_path / "own" / "src")


def test_checkouts_at_paths_of_any_length_give_the_same_environment(tmp_path, monkeypatch):
    short = checkout(tmp_path, "a")
    long = checkout(tmp_path, "a/much/longer/path/to/a/checkout/of/the/project")
    monkeypatch.setenv("PATH", "/x" * 300 + os.pathsep + os.environ["PATH"])
    first, one = made(tmp_path, short, "s1")
    second, two = made(tmp_path, long, "s2")
    # the same once each private folder is named alike (their names have the same length)
    assert {k: v.replace(str(two), str(one)) for k, v in second.items()} == first
    assert (one / "src" / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (two / "src").resolve() == long.resolve()
    assert "/x/x" not in first["PATH"]


def test_the_sources_bytecode_is_written_before_counting(tmp_path):
    root = checkout(tmp_path, "root")
    made(tmp_path, root, "s")
    assert list((root / "pkg" / "__pycache__").glob("__init__.*.pyc"))


def test_avx512_is_never_asked_of_valgrind(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    env, _ = made(tmp_path, checkout(tmp_path, "root"), "s")
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["TORCHINDUCTOR_CPP_MARCH"] == "x86-64-v3"  # not -march=native


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="runs in a virtual environment only")
def test_the_interpreter_is_called_through_a_link_of_fixed_length(tmp_path):
    python = Path(callgrind_process.python_in(tmp_path))
    assert str(python).startswith(str(tmp_path / "venv"))
    assert python.resolve() == Path(sys.executable).resolve()


def test_each_case_keeps_the_layout_with_the_fewest_instructions():
    summaries = [{"per_call": [101.0, 102.0, 103.0]}, {"per_call": [99.0, 100.0, 100.0]}]
    kept = callgrind._fewest(summaries)
    assert kept["layout"] == 1 and kept["per_call"] == [99.0, 100.0, 100.0]
    assert kept["per_layout"] == [102.0, 100.0]


def test_a_failed_counting_process_stops_the_others_with_one_line(tmp_path, monkeypatch):
    started = []

    def start(spec, root, scratch, log, layout, library):
        log.write_text("valgrind: the last line\n")
        command = ["sh", "-c", "exit 3"] if layout == 0 else ["sleep", "60"]
        started.append(subprocess.Popen(command))
        return started[-1]

    monkeypatch.setattr(callgrind, "_start", start)
    with pytest.raises(callgrind.CallgrindError, match="exit 3.*the last line"):
        spec = {"nodeids": ["t.py::case"], "args": [], "repeats": 2}
        callgrind.measure(spec, tmp_path, tmp_path / "log.txt", tmp_path / "lib.so", layouts=2)
    assert all(process.poll() is not None for process in started)  # none left running


def test_layouts_shift_the_classes_made_before_torch():
    assert callgrind_child.shift_layout(0) == []
    assert len(callgrind_child.shift_layout(2)) == 2 * callgrind_child.LAYOUT_CLASSES


def test_a_failed_count_names_the_processs_own_last_line_not_valgrinds(tmp_path):
    # valgrind's summary follows the Python error in the log: the one line said "I refs: 0"
    log = tmp_path / "callgrind.log"
    error = "Traceback (most recent call last):\n  ...\nImportError: no module named x\n"
    log.write_text(error + "==16606== \n==16606== Events    : Ir\n==16606== I   refs:      0\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(callgrind.CallgrindError, match="exit 3.*ImportError: no module named x"):
        callgrind._finish(process, tmp_path, log)
