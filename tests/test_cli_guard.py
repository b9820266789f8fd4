"""The ``perfgate`` commands under faults: bad arguments before any work (exit 2), SIGTERM and
Ctrl-C (exit 130, worktrees and half-built sites removed), pages unique per full test id; and
the pytest options that would silently do nothing (``-n 2 --benchmark-save``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import AB_CLOCK, COST_BENCHMARK, commit, cost_project, git, perfgate, worktrees

from perfgate.ab import bisect
from perfgate.cli import main
from perfgate.report import dashboard

ROOT = Path(__file__).resolve().parents[1]
# a benchmark that says it started, then runs until it is killed
HANGS = """
import os, time
from pathlib import Path

def test_hangs(benchmark):
    Path(os.environ["PERFGATE_MARKER"]).write_text("started")
    benchmark.pedantic(time.sleep, args=(60,), rounds=1, iterations=1)
"""


@pytest.fixture
def hanging_repo(tmp_path: Path) -> Path:
    """A git repository of two commits whose one benchmark hangs once started."""
    root = tmp_path / "repo"
    (root / "perf_tests").mkdir(parents=True)
    (root / "perf_tests" / "test_hangs.py").write_text(HANGS)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "0")
    (root / "README").write_text("a change: A and B differ")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "1")
    return root


@pytest.mark.parametrize(
    "command",
    [["ab", "HEAD~1", "--blocks", "3"], ["bisect", "HEAD~1", "HEAD", "-k", "hangs"]],
    ids=["ab", "bisect"],
)
def test_sigterm_removes_the_worktrees(hanging_repo, tmp_path, command):
    marker = tmp_path / "started"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PERFGATE_MARKER=str(marker))
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_XDIST")}
    child = subprocess.Popen([sys.executable, "-m", "perfgate", *command], cwd=hanging_repo,
                             env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
        time.sleep(0.05)
    assert len(git(hanging_repo, "worktree", "list").splitlines()) > 1
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert len(git(hanging_repo, "worktree", "list").splitlines()) == 1


@pytest.mark.parametrize(
    ("option", "value"),
    [("--threshold", "-5%"), ("--threshold", "fast"), ("--alpha", "5"), ("--alpha", "0")],
)
def test_bisect_refuses_a_bad_threshold_or_alpha_before_measuring(
    capsys, monkeypatch, tmp_path, option, value
):
    monkeypatch.chdir(tmp_path)  # not a repository: were it accepted, nothing would be measured
    with pytest.raises(SystemExit) as exit_:
        main(["bisect", "HEAD~1", "HEAD", "-k", "x", f"{option}={value}"])
    assert exit_.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_two_bisections_started_in_one_second_get_their_own_folders(tmp_path):
    first = bisect._new_folder(tmp_path / "20261124-010203")
    second = bisect._new_folder(tmp_path / "20261124-010203")
    assert first != second and first.is_dir() and second.name == "20261124-010203-2"


def _history(root: Path, fullnames: list[str]) -> None:
    folder = root / "K" / "m"
    folder.mkdir(parents=True)
    for number in (1, 2):
        benchmarks = [{"name": name.split("::")[-1], "fullname": name,
                       "stats": {"median": 1e-3 * number, "data": [1e-3 * number] * 3}}
                      for name in fullnames]  # fmt: skip
        run_json = {"datetime": f"2026-11-2{number}T00:00:00+00:00", "benchmarks": benchmarks,
                    "machine_info": {"perfgate": {"hardware_key": "K"}}}  # fmt: skip
        (folder / f"{number:04d}_r.json").write_text(json.dumps(run_json))


def test_pages_and_plots_are_unique_per_full_test_id(tmp_path):
    pytest.importorskip("plotly")
    names = ["a/test_io.py::test_read[small]", "b/test_net.py::test_read[small]"]
    _history(tmp_path / "baselines", names)
    site = tmp_path / "site"
    status, _, err = perfgate("dashboard", "--out", str(site), "--baselines",
                              str(tmp_path / "baselines"))  # fmt: skip
    assert status == 0, err
    pages = {dashboard.page_path("K", name) for name in names}
    assert len(pages) == 2 and all((site / page).is_file() for page in pages)
    index = (site / "index.html").read_text()
    assert all(f"href='{page}'" in index for page in pages)
    where = ["--baselines", str(tmp_path / "baselines"), "--hardware", "K"]
    status, out, _ = perfgate("history", "test_read", "--out", str(tmp_path / "plots"), *where)
    assert status == 0 and len(list((tmp_path / "plots").glob("*.png"))) == 2, out


def test_ctrl_c_in_the_dashboard_leaves_the_old_site_whole(tmp_path, monkeypatch):
    pytest.importorskip("plotly")
    _history(tmp_path / "baselines", ["t.py::test_a"])
    site = tmp_path / "site"
    arguments = ["dashboard", "--out", str(site), "--baselines", str(tmp_path / "baselines")]
    assert perfgate(*arguments)[0] == 0
    before = sorted(p.relative_to(site) for p in site.rglob("*"))

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(dashboard, "_index", interrupted)  # after every page was written
    status, _, err = perfgate(*arguments)
    assert status == 130 and err.strip().endswith("interrupted; nothing was left half-written")
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baselines", "site"]  # no leftovers


# pytest in place: prints a line, then interrupts its parent (the perfgate command) and hangs
INTERRUPTS_PARENT = """
import os, signal, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
print("collected 1 item", flush=True)
os.kill(os.getppid(), signal.SIGINT)
time.sleep(60)
"""


def test_ctrl_c_in_profile_is_one_line_and_stops_pytest(tmp_path, monkeypatch):
    from perfgate.cli import profile

    pid_file = tmp_path / "pid"

    def command(test_id, folder, extra=()):
        return [sys.executable, "-c", INTERRUPTS_PARENT, str(pid_file)]

    monkeypatch.setattr(profile, "profile_argv", command)
    monkeypatch.chdir(ROOT)
    status, _, err = perfgate("profile", "perf_tests/test_sdpa.py::test_x", "--out", str(tmp_path))
    assert status == 130 and "interrupted" in err and "Traceback" not in err
    with pytest.raises(ProcessLookupError):  # the hanging pytest was stopped, and reaped
        os.kill(int(pid_file.read_text()), 0)


HANG_S = 3  # how long the hanging step sleeps: a step left running would log within the wait
# a step's benchmark that names its process and every ancestor (pytest, the step, git bisect
# run, perfgate, ...), then sleeps
HANGING_STEP = f"""
import os, time
from pathlib import Path

def test_work(benchmark):
    pids, pid = [], os.getpid()
    while pid > 1:
        pids.append(pid)
        pid = int(Path(f"/proc/{{pid}}/stat").read_text().rpartition(")")[2].split()[1])
    Path(os.environ["PERFGATE_PIDS"] + ".new").write_text(" ".join(map(str, pids)))
    os.replace(os.environ["PERFGATE_PIDS"] + ".new", os.environ["PERFGATE_PIDS"])
    time.sleep({HANG_S})
"""


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_in_bisect_stops_git_bisect_run_and_its_steps(tmp_path):
    """GOOD and BAD measured, git bisect run's step hangs in its pytest: Ctrl-C to perfgate alone
    leaves no process of the bisection running and nothing written to its results after it."""
    repo = cost_project(tmp_path / "repo")
    (repo / "perf_tests" / "test_work.py").write_text(HANGING_STEP)
    commit(repo, "the step hangs")
    (repo / "perf_tests" / "test_work.py").write_text(COST_BENCHMARK)
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    pids, temporary, results = tmp_path / "pids", tmp_path / "tmp", tmp_path / "results"
    temporary.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), PERFGATE_PIDS=str(pids), TMPDIR=str(temporary))
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_XDIST")}
    command = ["bisect", "HEAD~2", "HEAD", "-k", "test_work", "--tests", "perf_tests",
               "--threshold", "25%", "--out", str(results), "--", AB_CLOCK]  # fmt: skip
    child = subprocess.Popen([sys.executable, "-m", "perfgate", *command], cwd=repo, env=env,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not pids.exists():
        assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
        time.sleep(0.05)
    chain = [int(pid) for pid in pids.read_text().split()]
    assert child.pid in chain, chain
    bisection = chain[: chain.index(child.pid)]  # pytest, the step, git bisect run
    assert len(bisection) >= 2, chain
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    log = next(results.rglob("steps.jsonl"))
    written = log.read_text()
    assert child.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        "perfgate bisect: interrupted; the repository is left as it was"
    ), err
    assert "Traceback" not in err, err
    grace = time.monotonic() + 1  # a killed process may take a moment to go
    while any(running(pid) for pid in bisection) and time.monotonic() < grace:
        time.sleep(0.05)
    assert [pid for pid in bisection if running(pid)] == []
    time.sleep(HANG_S)  # a step left running would have woken up and logged by now
    assert log.read_text() == written
    assert list(temporary.iterdir()) == []
    assert worktrees(repo) == 1 and git(repo, "for-each-ref", "refs/bisect") == ""
