"""The child processes of bisect and ``perfgate profile``: a pytest command line (``pytest``), run
with its output in a log or streamed (``run``, ``stream``); and, on git as ``children`` runs it
(one ``git``, one child ``environment`` for both), a commit named or not, a worktree added and
removed, and a long run's transcript. A child pytest is a session of its own, never taken for
an xdist worker (pytest-benchmark turns itself off in one).

A long child runs in a session (and process group) of its own (``session``): on Ctrl-C, SIGTERM
or any error, the whole group is stopped before the command goes on, so nothing it started (git
bisect run's steps and their pytest) outlives the command or writes after it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.children import environment, git, git_succeeds, session


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
    with session(["git", *arguments], cwd=cwd, text=True, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT) as process:  # fmt: skip
        for line in process.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
    return "".join(lines)


def pytest(*arguments: str) -> list[str]:
    """The command line of a child pytest with this Python."""
    return [sys.executable, "-m", "pytest", *arguments]


def run(command: Sequence[str], cwd: Path | None = None, log: Path | None = None,
        tree: Path | None = None, alone: bool = True) -> int:  # fmt: skip
    """Run a child pytest (``command``: ``pytest(...)``) in ``cwd``, in its ``environment``: its
    output into ``log`` (else this terminal); its exit status. ``alone``: in a ``session`` of its
    own (False: in this process's group, for a process whose whole group is stopped, as git
    bisect run's step is)."""
    start = session if alone else subprocess.Popen
    with contextlib.ExitStack() as files:
        output = None if log is None else files.enter_context(open(log, "w", encoding="utf-8"))
        errors = None if log is None else subprocess.STDOUT
        with start(command, cwd=cwd, env=environment(tree), stdout=output,
                   stderr=errors) as process:  # fmt: skip
            return process.wait()


def stream(command: Sequence[str], out) -> int:
    """Run a child pytest (``command``), its output streamed line by line to ``out``; its exit
    status. On Ctrl-C or SIGTERM it is stopped first, with all it started (``session``): it never
    outlives the command."""
    with session(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                 bufsize=1, env=environment()) as process:  # fmt: skip
        for line in process.stdout:
            out.write(line)
            out.flush()
        return process.wait()
