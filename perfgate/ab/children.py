"""Every child process of perfgate's commands, started here: git, the stored comparison's
pytest session, the long-lived block processes (``server``) of the A/B and the nightly, and the
pytest and git of bisect and ``perfgate profile`` (a command line run with its output in a log
or streamed, a commit named, a worktree added and removed, a long run's transcript). A child
never inherits pytest-xdist's worker variables (pytest-benchmark would take its session for a
worker's); a block process gets its tree first on ``PYTHONPATH`` and its GPU in
``CUDA_VISIBLE_DEVICES``.

No child outlives its parent killed (``kill -9``): the stored comparison's session, in a session
of its own, is sent SIGTERM when its parent dies (Linux's ``PR_SET_PDEATHSIG``); a block process
ends when its requests do, which the system closes with its parent."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from perfgate.ab import AbError

XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
STOP_GRACE_S = 2.0  # seconds a stopped process group has to exit on SIGTERM before SIGKILL
SERVER = Path(__file__).with_name("server.py")
# run by path, not imported: a tree under test may hold a perfgate of its own (A's is older)
BOOT = (
    "import runpy, sys; sys.argv[:2] = sys.argv[1:2]; runpy.run_path(sys.argv[0], None, '__main__')"
)


def git(root: Path, *arguments: str) -> str:
    """``git -C root ARGUMENTS``'s output; AbError with git's last line when it fails."""
    result = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise AbError(f"git {' '.join(arguments)} failed: {detail}")
    return result.stdout.strip()


def git_succeeds(root: Path, *arguments: str) -> bool:
    """Whether ``git -C root ARGUMENTS`` exits 0 (a question git answers by its status)."""
    result = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True)
    return result.returncode == 0


def environment(tree: Path | None = None, gpu: str | None = None) -> dict[str, str]:
    """This process's environment for a child: no xdist worker variables; ``tree`` first on
    PYTHONPATH; ``gpu`` (an index or UUID, or a list of them) as the visible CUDA devices; the
    same string hashes in every child (PYTHONHASHSEED 0 unless set): a random seed per process
    lays dicts and sets out differently in the two trees' processes, a constant offset between
    them that pairing cannot cancel."""
    env = {k: v for k, v in os.environ.items() if k not in XDIST_VARIABLES}
    env.setdefault("PYTHONHASHSEED", "0")
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def run_pytest(arguments: list[str], gpus: list[str | None]) -> int:
    """``python -m pytest ARGUMENTS`` here, on ``gpus`` (``[None]``: as this process sees
    them), its output on this terminal, ended if this process is killed; its exit status."""
    command = [sys.executable, "-m", "pytest", *arguments]
    visible = ",".join(gpu for gpu in gpus if gpu is not None) or None
    with session(command, env=environment(gpu=visible), preexec_fn=ends_with_parent()) as process:
        return process.wait()


PR_SET_PDEATHSIG = 1  # prctl's option: the signal a process gets when its parent thread ends


def ends_with_parent():
    """For ``Popen(preexec_fn=...)``: the child is sent SIGTERM when the thread that started it
    ends (its process killed, even by SIGKILL), and ends at once if that happened already.
    None where the system has no ``prctl`` (not Linux). The thread waits for the child."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)  # the C library's
    if prctl is None:
        return None
    parent = os.getpid()

    def set_death_signal() -> None:  # in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)

    return set_death_signal


def start_server(tree: Path, gpu: str | None, log: Path) -> tuple[subprocess.Popen, int, int]:
    """A block process for ``tree`` on ``gpu``: (the process, the fd to write its requests to,
    the fd to read its replies from). Its own output goes to ``log``."""
    request_read, request_write = os.pipe()
    reply_read, reply_write = os.pipe()
    command = [sys.executable, "-c", BOOT, str(SERVER), str(request_read), str(reply_write)]
    with open(log, "ab") as output:
        process = subprocess.Popen(
            command,
            cwd=tree,
            env=environment(tree, gpu),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            pass_fds=(request_read, reply_write),
        )
    os.close(request_read)
    os.close(reply_write)
    return process, request_write, reply_read


@contextlib.contextmanager
def session(command: Sequence[str], **options) -> Iterator[subprocess.Popen]:
    """``command`` started (``subprocess.Popen`` with ``options``) in a session and process group
    of its own; on any exception in the block (Ctrl-C, SIGTERM, an error) the whole group is
    stopped (``stop``) before the exception goes on, else the child is waited for."""
    with subprocess.Popen(command, start_new_session=True, **options) as process:
        try:
            yield process
        except BaseException:
            stop(process)
            raise


def stop(process: subprocess.Popen) -> None:
    """Stop a child started by ``session`` and everything in its process group: SIGTERM, then
    SIGKILL to whatever is left after ``STOP_GRACE_S`` seconds (or at once on a second Ctrl-C);
    the child is reaped."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(STOP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group is empty
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def commit_of(root: Path, revision: str) -> str | None:
    """The full commit id ``revision`` names in ``root``; None when it names no commit."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except AbError:
        return None


def add_worktree(root: Path, folder: Path, commit: str) -> Path:
    """A detached worktree of ``commit`` at ``folder`` (``remove_worktree`` takes it away)."""
    git(root, "worktree", "add", "--detach", str(folder), commit)
    return folder


def remove_worktree(root: Path, folder: Path) -> bool:
    """Remove a worktree ``add_worktree`` made (and git's note of it); whether it is gone."""
    removed = git_succeeds(root, "worktree", "remove", "--force", str(folder))
    git_succeeds(root, "worktree", "prune")
    return removed


def git_transcript(cwd: Path, *arguments: str, on_line=None) -> str:
    """What ``git ARGUMENTS`` printed (output and errors), however it exited, each line given
    to ``on_line`` as it comes: for a long run (``bisect run``) whose log tells what happened."""
    lines = []
    with session(
        ["git", *arguments], cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as process:
        for line in process.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
    return "".join(lines)


def pytest(*arguments: str) -> list[str]:
    """The command line of a child pytest with this Python."""
    return [sys.executable, "-m", "pytest", *arguments]


def run(
    command: Sequence[str],
    cwd: Path | None = None,
    log: Path | None = None,
    tree: Path | None = None,
    alone: bool = True,
) -> int:
    """Run a child pytest (``command``: ``pytest(...)``) in ``cwd``, in its ``environment``: its
    output into ``log`` (else this terminal); its exit status. ``alone``: in a ``session`` of its
    own (False: in this process's group, for a process whose whole group is stopped, as git
    bisect run's step is)."""
    start = session if alone else subprocess.Popen
    with contextlib.ExitStack() as files:
        output = None if log is None else files.enter_context(open(log, "w", encoding="utf-8"))
        errors = None if log is None else subprocess.STDOUT
        with start(
            command, cwd=cwd, env=environment(tree), stdout=output, stderr=errors
        ) as process:
            return process.wait()


def stream(command: Sequence[str], out) -> int:
    """Run a child pytest (``command``), its output streamed line by line to ``out``; its exit
    status. On Ctrl-C or SIGTERM it is stopped first, with all it started (``session``): it never
    outlives the command."""
    with session(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=environment(),
    ) as process:
        for line in process.stdout:
            out.write(line)
            out.flush()
        return process.wait()
