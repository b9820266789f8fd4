"""Faults while saving a run: a full or read-only disk, a kill, a Ctrl-C, a bad name. Each gives
one line and the documented exit, and the run is kept (in the store, or put aside in
perfgate-results/unsaved/). Disks are real (a tmpfs, a read-only bind mount) where this process
may mount them, and a patched ``os.link`` otherwise."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import assert_one_line, mount, run, saved_runs

from perfgate import store
from perfgate.fields import RUN_FORMAT
from perfgate.store import owners, saving

# a conftest for the inner project: every hard link under baselines/ fails with ERRNO
BROKEN_DISK = """
import errno, os
real_link = os.link
def link(source, target, *args, **kwargs):
    if "baselines" in str(target):
        raise OSError(errno.{name}, os.strerror(errno.{name}), str(target))
    return real_link(source, target, *args, **kwargs)
os.link = link
"""


def unsaved(project: pytest.Pytester) -> list[Path]:
    return sorted((project.path / "perfgate-results" / "unsaved").glob("*.json"))


@pytest.fixture
def full_disk(tmp_path: Path):
    """A 64 KiB tmpfs with 4 KiB free: a real ENOSPC."""
    folder = tmp_path / "full"
    folder.mkdir()
    if not mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)):
        pytest.skip("cannot mount a tmpfs here (not root); the patched-disk test covers it")
    (folder / "filler").write_bytes(b"\0" * 60 * 1024)
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("name", ["ENOSPC", "EROFS", "EACCES"])
def test_a_disk_that_refuses_the_save_keeps_the_run_aside(bench_project, name):
    bench_project.makeconftest(BROKEN_DISK.format(name=name))
    result = run(bench_project, "--benchmark-save=kept")
    assert_one_line(result, saving.SAVE_FAILED, "NOT saved to the store: " + os.strerror(
        getattr(errno, name)))  # fmt: skip
    (kept,) = unsaved(bench_project)
    assert kept.name.endswith("_kept.json") and json.loads(kept.read_text())["benchmarks"]
    assert str(kept) in result.stdout.str()
    assert saved_runs(bench_project) == []


def test_a_really_full_disk_keeps_the_run_aside(bench_project, full_disk):
    result = run(bench_project, f"--perf-baselines={full_disk}", "--benchmark-save=kept")
    assert_one_line(result, saving.SAVE_FAILED, "No space left on device")
    assert len(unsaved(bench_project)) == 1
    assert not [p for p in full_disk.rglob("*") if p.name.startswith(".")]  # nothing left behind


def test_a_read_only_store_keeps_the_run_aside(bench_project, read_only_disk):
    result = run(bench_project, f"--perf-baselines={read_only_disk}", "--benchmark-save=kept")
    assert_one_line(result, saving.SAVE_FAILED, "Read-only file system")
    assert len(unsaved(bench_project)) == 1


def test_a_saved_run_leaves_nothing_aside_and_follows_the_umask(bench_project):
    old = os.umask(0o027)
    try:
        result = run(bench_project, "--benchmark-save=ok")
    finally:
        os.umask(old)
    assert result.ret == 0
    (saved,) = saved_runs(bench_project)
    assert saved.stat().st_mode & 0o777 == 0o640
    assert unsaved(bench_project) == []
    assert json.loads(saved.read_text())["machine_info"]["perfgate"]["format"] == RUN_FORMAT


def test_parameters_that_json_cannot_hold_are_saved_as_text_and_gated(bench_project):
    """A project parametrized by classes and enums (cattrs' bench/: converter classes,
    UnstructureStrategy): the run is saved, --benchmark-json written, and gated against."""
    bench_project.makepyfile(
        test_bench="""
        import enum, pytest
        from virtual_clock import work
        class Strategy(enum.Enum):
            AS_DICT = "asdict"
        class Converter:
            pass
        @pytest.mark.parametrize("strategy", [Strategy.AS_DICT])
        @pytest.mark.parametrize("converter_cls", [Converter])
        def test_convert(benchmark, strategy, converter_cls):
            benchmark.pedantic(work, rounds=20, iterations=1, warmup_rounds=1)
    """
    )
    saved = run(bench_project, "--benchmark-save=objects", "--benchmark-json=out.json")
    assert saved.ret == 0, saved.stdout.str()
    (run_file,) = saved_runs(bench_project)
    (case,) = json.loads(run_file.read_text())["benchmarks"]
    assert "Strategy.AS_DICT" in case["params"]["strategy"]
    assert "Converter" in json.loads((bench_project.path / "out.json").read_text())[
        "benchmarks"][0]["params"]["converter_cls"]  # fmt: skip
    assert unsaved(bench_project) == []
    assert run(bench_project, "--perf-gate").ret == 0


@pytest.mark.parametrize("name", ["a" * 260, "two\nlines", ".hidden", "tab\there"])
def test_a_save_name_that_cannot_be_a_run_file_is_refused_before_running(bench_project, name):
    result = run(bench_project, f"--benchmark-save={name}")
    assert_one_line(result, pytest.ExitCode.USAGE_ERROR, "--benchmark-save")
    assert not (bench_project.path / "ran").exists()


def test_ctrl_c_in_a_first_round_keeps_the_cases_measured_before(bench_project):
    bench_project.makepyfile(test_zz_interrupt="""
        import os, signal
        def test_interrupted(benchmark):
            benchmark.pedantic(lambda: os.kill(os.getpid(), signal.SIGINT), rounds=5)
    """)  # fmt: skip
    result = run(bench_project, "--benchmark-save=partial")
    output = assert_one_line(result, pytest.ExitCode.INTERRUPTED, "NOT saved as a baseline")
    assert "min() arg" not in output
    (kept,) = unsaved(bench_project)
    names = [b["name"] for b in json.loads(kept.read_text())["benchmarks"]]
    assert names == ["test_work"]


def test_sigterm_keeps_the_cases_measured_before(bench_project):
    bench_project.makepyfile(test_zz_terminated="""
        import os, signal
        def test_terminated(benchmark):
            os.kill(os.getpid(), signal.SIGTERM)
    """)  # fmt: skip
    result = run(bench_project, "--benchmark-save=partial")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "NOT saved as a baseline: the session was interrupted" in result.stdout.str()
    (kept,) = unsaved(bench_project)
    assert [b["name"] for b in json.loads(kept.read_text())["benchmarks"]] == ["test_work"]


@pytest.mark.parametrize("json", [False, True])
def test_sigterm_before_any_case_was_measured_is_one_line_even_under_warnings_as_errors(
    bench_project, json
):
    """pytest-benchmark warns "Not saving anything" when no result is left: a traceback under
    `filterwarnings = error` (a kornia baseline stopped by `timeout` while it was counted)."""
    bench_project.makefile(".ini", pytest="[pytest]\nfilterwarnings = error\n")
    (bench_project.path / "virtual_clock.py").unlink()  # the real clock: the call never returns
    bench_project.makepyfile(test_bench="""
        import os, signal
        def test_terminated(benchmark):
            benchmark(lambda: os.kill(os.getpid(), signal.SIGTERM))
    """)  # fmt: skip
    asked = ["--benchmark-json=out.json"] if json else ["--benchmark-save=first"]
    result = run(bench_project, *asked)
    assert_one_line(result, pytest.ExitCode.INTERRUPTED, "interrupted before any case was measured")
    assert saved_runs(bench_project) == [] and unsaved(bench_project) == []

    bench_project.makepyfile(test_bench="def test_failed(benchmark):\n    assert False\n")
    result = run(bench_project, *asked)  # no case measured, none interrupted: the same, exit 1
    assert_one_line(result, pytest.ExitCode.TESTS_FAILED, "perfgate: no case was measured")


def test_ctrl_c_during_the_save_finishes_it_and_exits_2(bench_project):
    bench_project.makeconftest("""
        import os, signal
        from perfgate import store
        real_save_file = store.save_file
        def save_file(*arguments):
            os.kill(os.getpid(), signal.SIGINT)
            return real_save_file(*arguments)
        store.save_file = save_file
    """)
    result = run(bench_project, "--benchmark-save=during")
    assert_one_line(result, pytest.ExitCode.INTERRUPTED, "interrupted by SIGINT during the save")
    assert len(saved_runs(bench_project)) == 1 and unsaved(bench_project) == []


# a conftest that signals its own process in one hook after the main loop: a CI runner's cancel
# in the moments after [100%] (before pytest-benchmark saves, in the summary, at unconfigure)
SIGNAL_IN_HOOK = """
import os, signal, pytest

def send():
    os.kill(os.getpid(), signal.{signal})

if "{hook}" == "pytest_sessionfinish":
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(session):
        send()
        yield
elif "{hook}" == "pytest_terminal_summary":
    def pytest_terminal_summary(terminalreporter):
        send()
else:
    def pytest_unconfigure(config):
        send()
"""


@pytest.mark.parametrize(
    "number, hook",
    [("SIGTERM", "pytest_sessionfinish"), ("SIGTERM", "pytest_terminal_summary"),
     ("SIGTERM", "pytest_unconfigure"), ("SIGINT", "pytest_sessionfinish")],
)  # fmt: skip
def test_a_signal_after_the_last_test_saves_the_run_first_and_exits_2(bench_project, hook, number):
    assert run(bench_project, "--benchmark-save=base").ret == 0
    bench_project.makeconftest(SIGNAL_IN_HOOK.format(signal=number, hook=hook))
    result = run(bench_project, "--perf-gate", "--benchmark-save=after")
    assert_one_line(result, pytest.ExitCode.INTERRUPTED, f"perfgate: {number} after the last test")
    assert [p.name for p in saved_runs(bench_project)] == ["0001_base.json", "0002_after.json"]
    assert unsaved(bench_project) == []
    assert (bench_project.path / "perfgate-results" / "gate.md").exists()


def test_when_even_the_project_folder_is_full_the_run_goes_to_the_temporary_folder(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(saving, "UNSAVED", Path("not-a-folder") / "unsaved")
    (tmp_path / "not-a-folder").write_text("a file where the folder should be")
    monkeypatch.setattr(saving.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    outcome = saving.save_run({"benchmarks": []}, "x", tmp_path, "gate failed", None)
    assert outcome.kept.parent == tmp_path / "tmp" / "perfgate-unsaved"
    assert str(outcome.kept) in outcome.line and not outcome.failed


# --- claims and temporary files left by a killed save --------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _run_json() -> dict:
    stats = {"median": 1e-3, "data": [1e-3, 1.1e-3]}
    bench = {"name": "test_a", "fullname": "t.py::test_a", "stats": stats}
    return {"datetime": "2026-11-22T00:00:00+00:00", "benchmarks": [bench]}


def test_claims_and_temporary_files_of_a_dead_process_are_removed(tmp_path):
    key = tmp_path / "KEY"
    (key / "m").mkdir(parents=True)
    pid = _dead_pid()
    (key / ".claim-0001").write_text(f"{owners.token().split()[0]} {pid} 1")
    future = key / ".claim-0002"
    future.write_text(f"{owners.token().split()[0]} {pid} 1")
    os.utime(future, (4e9, 4e9))  # dated 2096
    (key / "m" / f".saving-{pid}-1-abcd.json").write_text("{")
    saved = store.save(key, "m", "after-kill", _run_json())
    assert saved.name == "0001_after-kill.json"
    assert sorted(p.name for p in key.rglob("*")) == ["0001_after-kill.json", "m"]


def test_a_live_claim_is_passed_over_not_waited_for(tmp_path):
    key = tmp_path / "KEY"
    key.mkdir()
    (key / ".claim-0001").write_text(owners.token())  # this very process: alive
    assert store.save(key, "m", "next", _run_json()).name == "0002_next.json"


KILLED_SAVE = """
import sys, time
from pathlib import Path
from perfgate.store import owners
from perfgate import store
real = owners.linkable
def stuck(source, folder):
    copy = real(source, folder)
    Path(sys.argv[2]).write_text("claimed")
    time.sleep(60)
owners.linkable = stuck
store.save(Path(sys.argv[1]), "m", "killed", {"benchmarks": []})
"""


def test_kill_9_in_the_middle_of_a_save_blocks_nothing(tmp_path):
    key, marker = tmp_path / "KEY", tmp_path / "claimed"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    child = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(key), str(marker)], env=env)
    while not marker.exists():
        assert child.poll() is None, "the saving child died before claiming"
        time.sleep(0.01)
    assert list(key.glob(".claim-*"))
    child.send_signal(signal.SIGKILL)
    child.wait()
    saved = store.save(key, "m", "after-kill", _run_json())
    assert saved.name == "0001_after-kill.json"
    assert sorted(p.name for p in key.rglob("*")) == ["0001_after-kill.json", "m"]


KILLED_PUT_ASIDE = """
import sys, time
from pathlib import Path
from perfgate.store import owners, saving
def stuck(file, path, text, mode=None):
    file.write(text[: len(text) // 2])
    file.flush()
    Path(sys.argv[2]).write_text("half written")
    time.sleep(60)
owners.fill = stuck
saving.put_aside({"benchmarks": [], "padding": "x" * 100000}, "killed", Path(sys.argv[1]))
"""


def test_kill_9_while_a_run_is_put_aside_leaves_no_file_named_like_a_run(tmp_path):
    marker = tmp_path / "half"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    child = subprocess.Popen([sys.executable, "-c", KILLED_PUT_ASIDE, str(tmp_path), str(marker)],
                             env=env)  # fmt: skip
    while not marker.exists():
        assert child.poll() is None, "the child died before writing"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    folder = tmp_path / saving.UNSAVED
    assert not list(folder.glob("*_killed.json")) and len(list(folder.glob(".saving-*"))) == 1
    kept = saving.put_aside(_run_json(), "next", tmp_path)  # removes what the dead one left
    assert [p.name for p in folder.iterdir()] == [kept.name] and kept.name.endswith("_next.json")


def test_a_session_that_saves_nothing_leaves_no_empty_hardware_folder(bench_project):
    (bench_project.path / "bl").mkdir()
    for options in (["--benchmark-disable"], []):
        assert run(bench_project, "--perf-baselines=bl", *options).ret == 0
        assert list((bench_project.path / "bl").iterdir()) == []


def test_a_disk_full_when_the_gate_writes_its_summary_is_one_line(bench_project):
    assert run(bench_project, "--benchmark-save=base").ret == 0
    bench_project.makeconftest("""
        import errno, os, pathlib
        real_write_text = pathlib.Path.write_text
        def write_text(self, *arguments, **keywords):
            if self.name == "gate.md":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
            return real_write_text(self, *arguments, **keywords)
        pathlib.Path.write_text = write_text
    """)
    result = run(bench_project, "--perf-gate")
    assert_one_line(result, pytest.ExitCode.OK, "could not write")
    assert "No space left on device" in result.stdout.str()


@pytest.mark.parametrize("asked, status", [("--perf-gate", 6), ("--benchmark-save=x", 4)])
def test_a_baselines_folder_that_links_to_itself_is_one_line(bench_project, asked, status):
    (bench_project.path / "loop").symlink_to(bench_project.path / "loop")
    result = run(bench_project, "--perf-baselines=loop", asked)
    assert_one_line(result, status, "loop cannot be read as a folder: Too many levels of symbolic")
    assert not (bench_project.path / "ran").exists()
