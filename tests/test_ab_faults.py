"""What the A/B and the nightly do when something around them goes wrong: a second A/B on the same
results folder, a tree that changed before ``--resume``, an A that is the tree under test but for
untracked files, a journal that is not text, a parent killed with ``kill -9``, a disk that fills,
and the lines that say so (one line each, the documented exit status). The A/Bs run in a throwaway
git repository timed on a virtual clock (conftest's ``repo``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    AB_CLOCK,
    LOAD_PLUGIN,
    children_import_this_checkout,
    commit,
    error_line,
    git,
    mount,
    perfgate,
    rounds_at,
    worktrees,
)

from perfgate import store
from perfgate.ab import AbError, blocks, children, journal, server, trees
from perfgate.ab.compare import INTERRUPTED, AbOptions, AbRun, _run, remaining_note
from perfgate.ab.engine import Block
from perfgate.ab.order import A, B
from perfgate.verdict.thresholds import Thresholds

# a pytest process of a repository with this conftest waits, as it loads it (before any check),
# while the file PERFGATE_TEST_HOLD names exists, having written its process id beside it: a test
# holds an A/B or a nightly there
HOLD = """
import os, time
from pathlib import Path

hold = os.environ.get("PERFGATE_TEST_HOLD")
if hold:
    Path(f"{hold}.{os.getpid()}").write_text("")
    while os.path.exists(hold):
        time.sleep(0.02)
"""
WAIT_S = 60.0  # the most a test waits for a child to get somewhere (it never takes this long)


def held_repo(repo: Path) -> Path:
    """``repo`` with HOLD in both trees and B twice as slow as A (HEAD~1): a regression."""
    (repo / "conftest.py").write_text(HOLD)
    commit(repo, "sessions can be held")
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    hold = repo.parent / "hold"
    hold.write_text("")
    return hold


def start(repo: Path, hold: Path, *argv: str) -> subprocess.Popen:
    """``perfgate ARGV`` in a process of its own, its sessions held at ``hold``."""
    env = {**os.environ, "PERFGATE_TEST_HOLD": str(hold)}
    return subprocess.Popen(
        [sys.executable, "-m", "perfgate", *argv],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def held_sessions(hold: Path) -> list[int]:
    """The process ids of the sessions waiting at ``hold``, once there is one."""
    deadline = time.monotonic() + WAIT_S
    while not (found := list(hold.parent.glob(f"{hold.name}.*"))):
        assert time.monotonic() < deadline, "no session reached the hold"
        time.sleep(0.05)
    return [int(path.suffix[1:]) for path in found]


def ended(pid: int) -> bool:
    """Whether process ``pid`` ended (gone, or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def results(path: Path) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(path.read_text())["rows"]}


# --- 1: one A/B in a results folder at a time --------------------------------------------------
def test_a_second_ab_on_the_same_results_folder_is_refused_and_the_first_decides_alone(
    repo, tmp_path, monkeypatch
):
    # two A/Bs on one folder shared one journal and its block files: one read the other's blocks
    children_import_this_checkout(monkeypatch)
    hold = held_repo(repo)
    out = tmp_path / "results" / "ab.json"
    first = start(repo, hold, "ab", "HEAD~1", "--blocks", "3", "--out", str(out), "--", AB_CLOCK)
    try:
        held_sessions(hold)  # the first is collecting its cases
        status, _, err = perfgate(
            "ab", "HEAD~1", "--blocks", "3", "--out", str(out), "--", AB_CLOCK
        )
        assert status == 2, err
        line = error_line(err, "ab")
        assert f"another A/B (process {first.pid}) is running in {out.parent / 'ab-blocks'}" in line
        assert worktrees(repo) == 2  # the first's A only
    finally:
        hold.unlink()
        _, first_err = first.communicate(timeout=WAIT_S)
    assert first.returncode == 1, first_err
    (row,) = results(out).values()
    assert row["verdict"] == "regression" and 90 < row["change_percent"] < 110
    assert row["pairs"] == 3
    lines = (out.parent / "ab-blocks" / journal.NAME).read_text().splitlines()
    assert sum('"plan"' in line for line in lines) == 1 and len(lines) == 1 + 6 + 1
    assert worktrees(repo) == 1
    # the lock went with the first: the next A/B on the folder runs
    assert perfgate("ab", "HEAD~1", "--blocks", "3", "--out", str(out), "--", AB_CLOCK)[0] == 1


def test_the_nightly_holds_its_results_folder_and_its_own_ab_runs_in_it(tmp_path, monkeypatch):
    children_import_this_checkout(monkeypatch)
    folder = tmp_path / "results" / "ab-blocks"
    with journal.only_one(folder):
        with journal.only_one(folder):  # the nightly's own A/B
            pass
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys\nfrom pathlib import Path\n"
                "from perfgate.ab import journal\n"
                "with journal.only_one(Path(sys.argv[1])): pass",
                str(folder),
            ],
            capture_output=True,
            text=True,
        )
        assert other.returncode == 1 and "another A/B (process" in other.stderr
    with journal.only_one(folder):  # released
        pass


# --- 2: --resume only on the tree as it was -----------------------------------------------------
def interrupted_ab(repo: Path, out: Path, monkeypatch) -> None:
    """An A/B of HEAD~1 (twice the cost) interrupted after its first block pair."""
    ran, run_block = [], blocks.run_block

    def stopping(process, names, pytest_args, report, log):
        if len(ran) == 2:
            raise KeyboardInterrupt
        ran.append(report)
        return run_block(process, names, pytest_args, report, log)

    monkeypatch.setattr(blocks, "run_block", stopping)
    status, _, err = perfgate("ab", "HEAD~1", "--blocks", "3", "--out", str(out), "--", AB_CLOCK)
    assert status == 130, err
    monkeypatch.setattr(blocks, "run_block", run_block)


def test_resume_refuses_a_tree_whose_untracked_files_changed(repo, tmp_path, monkeypatch):
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    (repo / "helper.py").write_text("SCALE = 1\n")  # untracked: a test may import it
    out = tmp_path / "ab.json"
    interrupted_ab(repo, out, monkeypatch)
    (repo / "helper.py").write_text("SCALE = 2\n")  # same name, other contents
    status, _, err = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--resume", "--out", str(out), "--", AB_CLOCK
    )
    assert status == 2
    line = error_line(err, "ab")
    assert "--resume: the tree under test is not as it was when the A/B began" in line
    assert "another one" not in line
    (repo / "helper.py").write_text("SCALE = 1\n")  # put back: it resumes
    status, _, err = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--resume", "--out", str(out), "--", AB_CLOCK
    )
    assert status == 1, err


def test_block_files_are_gzipped_once_read_and_a_resume_reads_them(repo, tmp_path, monkeypatch):
    # every round of every case is in a block's JSON: plain, 22 micro-benchmarks took 0.5-0.8 GB
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    out = tmp_path / "ab.json"
    interrupted_ab(repo, out, monkeypatch)
    folder = out.parent / "ab-blocks"
    kept = sorted(p.name for p in folder.glob("lane*-pair*"))
    assert kept and not [name for name in kept if name.endswith(".json")], kept
    assert all(json.loads(line)["file"].endswith(".json.gz")
               for line in (folder / journal.NAME).read_text().splitlines()[1:])  # fmt: skip
    status, _, err = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--resume", "--out", str(out), "--", AB_CLOCK
    )
    assert status == 1, err  # the kept blocks read back; twice the cost is confirmed
    (row,) = results(out).values()
    assert row["pairs"] == 3 and not list(folder.glob("*.json"))


@pytest.mark.parametrize("name", ["data.txt", "données é.txt", "tab\there.txt"])
def test_the_trees_identity_reads_untracked_files_contents(repo, name):
    # git quotes such names in its listings unless asked not to (-z)
    (repo / name).write_text("1")
    before = trees.state(repo, repo / "results")
    (repo / name).write_text("2")
    assert trees.state(repo, repo / "results") != before


def test_resume_on_other_gpus_plans_its_lanes_again(repo, tmp_path, monkeypatch):
    """The lanes are planned again on --resume (a case may move): another GPU count resumes."""
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    out = tmp_path / "ab.json"
    interrupted_ab(repo, out, monkeypatch)
    status, _, err = perfgate(
        "ab",
        "HEAD~1",
        "--blocks",
        "3",
        "--resume",
        "--gpus",
        "2",
        "--out",
        str(out),
        "--",
        AB_CLOCK,
    )
    assert status == 1, err  # the 2x slowdown, decided on the kept and the new blocks
    assert "Traceback" not in err


# --- 3: an A that is the tree under test, untracked files aside ---------------------------------
def test_an_untracked_file_does_not_make_head_another_tree(repo, tmp_path):
    (repo / "notes.txt").write_text("a note no test reads")
    status, _, err = perfgate("ab", "HEAD", "--out", str(tmp_path / "ab.json"), "--", AB_CLOCK)
    assert status == 2 and "is the tree under test, file for file" in error_line(err, "ab")
    assert worktrees(repo) == 1


def test_an_untracked_file_cannot_turn_a_stored_regression_into_an_a_a_unchanged(repo, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    row = {
        "name": "perf_tests/test_work.py::test_work",
        "verdict": "regression",
        "gated": True,
        "message": "slower",
        "change_percent": 30.0,
        "threshold": 0.02,
        "threshold_source": "floor 2%",
    }
    (results / "gate.json").write_text(json.dumps([row]))
    (repo / "notes.txt").write_text("a note no test reads")
    status, _, err = perfgate(
        "nightly",
        "--results",
        str(results),
        "--confirm-only",
        "--base-ref",
        "HEAD",
        "--blocks",
        "3",
        "--",
        AB_CLOCK,
    )
    assert status == 2 and "is the tree under test" in error_line(err, "nightly")
    assert not (results / "ab.json").exists() and not (results / "nightly-verdicts.json").exists()


# --- 8: a journal that is not text --------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["nightly", "--results", "{results}", "--resume", "--base-ref", "HEAD~1"],
        ["nightly", "--results", "{results}", "--confirm-only", "--base-ref", "HEAD~1"],
        ["ab", "HEAD~1", "--out", "{results}/ab.json"],
        ["ab", "HEAD~1", "--resume", "--out", "{results}/ab.json"],
    ],
)
def test_a_journal_that_is_not_utf8_is_one_line(repo, tmp_path, argv):
    (repo / "README").write_text("docs")
    commit(repo, "docs")
    results = tmp_path / "results"
    (results / "ab-blocks").mkdir(parents=True)
    (results / "gate.json").write_text("[]")
    (results / "ab-blocks" / journal.NAME).write_bytes(b'{"journal": 1, "plan": {}}\n\xff\xfe\n')
    argv = [arg.format(results=results) for arg in argv]
    status, _, err = perfgate(*argv, "--", AB_CLOCK)
    assert status == 2
    line = error_line(err, argv[0])
    assert f"the journal {results / 'ab-blocks' / journal.NAME} is not readable (not UTF-8" in line
    assert f"remove {results / 'ab-blocks'} to start over" in line


# --- 9: what kill -9 leaves ---------------------------------------------------------------------
KILLED_IN_A_WORKTREE = """
import os, signal, sys
from pathlib import Path
from perfgate.ab import trees

with trees.base_worktree(Path(sys.argv[1]), sys.argv[2]) as tree:
    print(tree, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_next_ab_removes_the_worktree_of_one_killed_and_keeps_one_in_use(repo, tmp_path):
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    base = git(repo, "rev-parse", "HEAD~1").strip()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_WORKTREE, str(repo), base],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = Path(killed.stdout.strip())
    try:
        assert left.is_dir() and worktrees(repo) == 2
        with trees.base_worktree(repo, base) as in_use:  # another A/B's, running
            status, _, err = perfgate(
                "ab", "HEAD~1", "--blocks", "3", "--out", str(tmp_path / "ab.json"), "--", AB_CLOCK
            )
            assert status == 1, err
            assert not left.parent.exists() and str(left) not in git(repo, "worktree", "list")
            assert in_use.is_dir() and worktrees(repo) == 2
        assert worktrees(repo) == 1
    finally:  # a temporary folder of this test, whatever happened
        shutil.rmtree(left.parent, ignore_errors=True)


def test_a_second_night_is_refused_and_the_stored_comparison_ends_with_a_killed_one(
    repo, tmp_path, monkeypatch
):
    children_import_this_checkout(monkeypatch)
    hold = held_repo(repo)
    night = start(repo, hold, "nightly", "--results", str(tmp_path / "r"), "--", *LOAD_PLUGIN)
    try:
        (session,) = held_sessions(hold)  # the stored comparison's pytest, in its own session
        status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"), "--", *LOAD_PLUGIN)
        assert status == 2 and f"another A/B (process {night.pid}) is running in" in err
        night.kill()
        night.communicate(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not ended(session):
            assert time.monotonic() < deadline, "the stored comparison outlived its nightly"
            time.sleep(0.05)
    finally:
        hold.unlink()


def test_the_death_signal_is_set_only_where_the_system_has_it():
    set_it = children.ends_with_parent()
    assert (set_it is not None) == sys.platform.startswith("linux")


# --- 10: the right cause, the right advice ------------------------------------------------------
class Decided:
    """Block processes on a virtual clock: B twice as slow as A, 10 virtual seconds a block."""

    def __init__(self, cases: list[str]):
        self.cases, self.now = cases, 0.0

    def clock(self) -> float:
        return self.now

    def collect(self, selection):
        return {A: set(self.cases), B: set(self.cases)}

    def warm(self, lanes):
        pass

    def run(self, block: Block, gpu, report: Path, log: Path):
        from helpers import entry, run_json

        cost = 2e-3 if block.label == B else 1e-3
        rows = [entry(name, rounds_at(cost, block.pair, n=10, cv=0.01)) for name in block.cases]
        report.write_text(json.dumps(run_json(*rows)))
        self.now += 10.0
        return store.read_results(report)

    def pids(self):
        return set()

    def stop(self):
        pass


def test_a_time_limit_after_every_case_was_decided_is_no_stop(tmp_path):
    # it said "stopped (time limit) with 0 case(s) undecided" and left the journal unfinished
    cases = ["perf_tests/test_a.py::test_a"]
    runner = Decided(cases)
    options = AbOptions(
        "A", blocks=5, thresholds=Thresholds(default=0.03), journal=tmp_path / "j", deadline=65.0
    )
    done = _run(options, runner, "abc", "tree", io.StringIO(), runner.clock)
    assert runner.now == 60.0  # three pairs in time, the fourth would end past the limit
    assert done.stopped is None and done.remaining == [] and done.results[0].verdict.gated
    assert remaining_note(done, options.journal) is None
    assert not journal.unfinished(options.journal)
    note = remaining_note(AbRun("abc", done.results, [], INTERRUPTED), options.journal)
    assert note == "the A/B was interrupted once it had decided every case: all is written"


def test_an_interrupt_before_the_ab_says_there_is_nothing_to_resume(repo, tmp_path, monkeypatch):
    def interrupted(arguments, gpus):
        raise KeyboardInterrupt

    monkeypatch.setattr(children, "run_pytest", interrupted)
    status, _, err = perfgate("nightly", "--results", str(tmp_path / "r"))
    assert status == 130 and "Traceback" not in err
    assert err.splitlines()[-1] == (
        "perfgate nightly: interrupted: nothing to resume: run the night again"
    )  # it said "the base worktree was removed; --resume continues": there was neither


def test_a_run_outside_a_store_is_not_restored_from_git(tmp_path):
    loose, stored = tmp_path / "nightly.json", tmp_path / "0001_base.json"
    for path in (loose, stored):
        path.write_text('{"benchmarks": [')
    with pytest.raises(store.StoreError) as raised:
        store.load(loose)
    assert "git" not in str(raised.value) and "write it again" in str(raised.value)
    with pytest.raises(store.StoreError, match="restore it from git"):
        store.load(stored)


def test_a_project_with_no_runs_at_all_is_no_hardware_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = perfgate("compare")
    line = error_line(err, "compare")
    assert status == 2 and f"no saved run in {tmp_path / '.benchmarks'}" in line
    assert "hardware (.benchmarks)" not in line


@pytest.mark.parametrize(
    "change, words",
    [
        ({"file": None}, "line 2: file missing or of the wrong kind"),
        ({"file": "../elsewhere.json"}, "line 2: file missing or of the wrong kind"),
        ({"pair": "0", "pids": None}, "line 2: pair, pids missing or of the wrong kind"),
    ],
)
def test_a_damaged_journal_line_says_what_is_wrong(tmp_path, change, words):
    folder, plan = tmp_path / "j", {"lanes": [["x"]], "blocks": 3}
    journal.Journal.open(folder, plan, resume=False)
    line = {
        "lane": 0,
        "pair": 0,
        "label": "A",
        "cases": ["x"],
        "file": "lane0-pair0-A.json",
        "seconds": 1.0,
        "pids": [],
    }
    with open(folder / journal.NAME, "a") as file:
        file.write(json.dumps(line | change) + "\n")
    with pytest.raises(AbError) as raised:
        journal.Journal.open(folder, plan, resume=True)
    assert words in str(raised.value) and "unsupported operand" not in str(raised.value)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 64 KiB tmpfs with 16 KiB free: room for an A/B's start, not for its blocks."""
    folder = tmp_path / "small"
    folder.mkdir()
    if not mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)):
        pytest.skip("cannot mount a tmpfs here (not root); the session's reply covers it")
    (folder / "filler").write_bytes(b"\0" * 48 * 1024)
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_disk_that_fills_during_the_ab_is_said_to_be_full(repo, tmp_path, small_disk):
    (repo / "cost.txt").write_text("0.002")
    commit(repo, "twice the cost")
    status, _, err = perfgate(
        "ab", "HEAD~1", "--blocks", "3", "--out", str(small_disk / "ab.json"), "--", AB_CLOCK
    )
    assert status == 2
    line = [line for line in err.splitlines() if line.startswith("perfgate ab: error: ")]
    assert len(line) == 1 and err.splitlines()[-1] == line[0] and "Traceback" not in err, err
    assert "(the disk is full): free space" in line[0] and "--resume" in line[0]
    assert worktrees(repo) == 1


def test_a_block_that_cannot_be_gzipped_is_one_line_and_stays_plain(tmp_path, monkeypatch):
    report = tmp_path / "lane0-pair0-A.json"
    report.write_text(json.dumps({"benchmarks": []}))

    def full(*args, **kwargs):
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(journal.gzip, "open", full)
    with pytest.raises(AbError) as raised:
        journal.Journal(tmp_path, {}, []).compact(report)
    line = str(raised.value)
    assert f"cannot write {report}.gz (the disk is full)" in line and "--resume" in line
    assert report.is_file() and [p.name for p in tmp_path.iterdir()] == [report.name]


def test_a_session_that_cannot_write_is_answered_not_ended(tmp_path, monkeypatch):
    def full(args, log):
        raise OSError(28, os.strerror(28), str(tmp_path / "lane0-pair0-B.json"))

    monkeypatch.setattr(server, "run_session", full)
    requests = io.StringIO(json.dumps({"args": [], "log": "x"}) + "\n" * 2)
    replies = io.StringIO()
    server.serve(requests, replies)
    answer = json.loads(replies.getvalue())
    assert answer == {
        "errno": 28,
        "error": os.strerror(28),
        "path": str(tmp_path / "lane0-pair0-B.json"),
    }
    error = blocks.not_written(Path(answer["path"]), OSError(answer["errno"], answer["error"]))
    assert "lane0-pair0-B.json (the disk is full): free space" in str(error)


def test_an_ab_whose_results_cannot_be_written_at_the_end_says_the_disk_is_full(
    repo, small_disk, monkeypatch
):
    from perfgate.ab import compare
    from perfgate.verdict import GateResult, Verdict

    done = AbRun("abc", [GateResult("perf_tests/test_work.py::test_work", Verdict.UNCHANGED, "")])
    monkeypatch.setattr(compare, "run_ab", lambda options, err: done)
    with open(small_disk / "the rest", "wb", buffering=0) as rest:  # fill what is left
        with pytest.raises(OSError):
            while True:
                rest.write(b"\0" * 4096)
    status, _, err = perfgate("ab", "HEAD", "--out", str(small_disk / "ab.json"))
    assert status == 2
    assert f"cannot write {small_disk / 'ab.json'} (the disk is full)" in error_line(err, "ab")
