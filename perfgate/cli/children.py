"""The child processes of the commands beyond the A/B's: a pytest command line (``pytest``), run
with its output in a log or streamed (``run``, ``stream``); and, on git as ``perfgate.ab.children``
runs it (one ``git``, one child ``environment`` for both), a commit named or not, a worktree added
and removed, and a long run's transcript. A child pytest is a session of its own, never taken for
an xdist worker (pytest-benchmark turns itself off in one)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.children import environment, git, git_succeeds


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
    with subprocess.Popen(["git", *arguments], cwd=cwd, text=True, stdout=subprocess.PIPE,
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
        tree: Path | None = None) -> int:  # fmt: skip
    """Run a child pytest (``command``: ``pytest(...)``) in ``cwd``, in its ``environment``: its
    output into ``log`` (else this terminal); its exit status."""
    env = environment(tree)
    if log is None:
        return subprocess.run(command, cwd=cwd, env=env).returncode
    with open(log, "w", encoding="utf-8") as output:
        return subprocess.run(command, cwd=cwd, env=env, stdout=output,
                              stderr=subprocess.STDOUT).returncode  # fmt: skip


def stream(command: Sequence[str], out) -> int:
    """Run a child pytest (``command``), its output streamed line by line to ``out``; its exit
    status. On Ctrl-C or SIGTERM the child is killed first: it never outlives the command."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1, env=environment())  # fmt: skip
    try:
        for line in process.stdout:
            out.write(line)
            out.flush()
        return process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
