"""The child processes the commands start, in one place: git (``git``, ``worktree``) and pytest
(``pytest`` builds its command line, ``run`` and ``stream`` run it). A child pytest is a session
of its own, never taken for an xdist worker (pytest-benchmark turns itself off in one), and tests
the tree it is given where one is.

A git command that fails is a ``CommandError`` with git's own last line (exit 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from perfgate.cli.guard import CommandError


def git(cwd: Path, *arguments: str) -> str:
    """Standard output of ``git ARGUMENTS`` in ``cwd``, stripped; CommandError naming the git
    command and its last line of output when it fails."""
    done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise CommandError(f"git {arguments[0]} failed: {lines[-1] if lines else 'no output'}")
    return done.stdout.strip()


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


def git_succeeds(cwd: Path, *arguments: str) -> bool:
    """Whether ``git ARGUMENTS`` exits 0 (a question, e.g. ``merge-base --is-ancestor``, or a
    cleanup that may find nothing to clean)."""
    return subprocess.run(["git", *arguments], cwd=cwd, capture_output=True).returncode == 0


def repository_root(cwd: Path, command: str) -> Path:
    """The top folder of the git repository around ``cwd``; CommandError when there is none."""
    try:
        return Path(git(cwd, "rev-parse", "--show-toplevel"))
    except CommandError:
        raise CommandError(f"{cwd} is not inside a git repository; run {command} in one") from None


def commit_of(root: Path, revision: str) -> str | None:
    """The full commit id ``revision`` names in ``root``; None when it names no commit."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except CommandError:
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


@contextmanager
def worktree(root: Path, commit: str, prefix: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a new temporary folder, removed on the way out
    (an error and Ctrl-C included)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield add_worktree(root, folder / "tree", commit)
    finally:
        remove_worktree(root, folder / "tree")
        shutil.rmtree(folder, ignore_errors=True)


def pytest(*arguments: str) -> list[str]:
    """The command line of a child pytest with this Python."""
    return [sys.executable, "-m", "pytest", *arguments]


def environment(tree: Path | None = None) -> dict[str, str]:
    """This process's environment for a child pytest: no xdist worker's variables (the child is
    a session of its own), and ``tree`` first on PYTHONPATH where given (its code is tested)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH")) if p)
    return env


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
