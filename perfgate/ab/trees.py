"""The two trees of an A/B: the repository (B, the tree under test, as it is on disk) and a
commit checked out into a temporary git worktree (A), removed on the way out whatever happens.
An A whose files are the tree under test's is refused: an A/A compares nothing, and would
override what the stored comparison found."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.children import git, git_succeeds


def repository_root(cwd: Path) -> Path:
    try:
        return Path(git(cwd, "rev-parse", "--show-toplevel"))
    except AbError:
        raise AbError(f"{cwd} is not inside a git repository; run it in one") from None


def resolve_commit(root: Path, ref: str, what: str = "BASE_REF") -> str:
    """The commit ``ref`` names; AbError naming the argument (``what``) when none."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except AbError:
        raise AbError(
            f"{what} {ref!r} names no commit in {root}; give a commit or a branch"
        ) from None


WRITTEN_BY_RUNNING = ("__pycache__", ".pytest_cache")


def untracked(root: Path, outputs: Path | None = None) -> list[str]:
    """Untracked files that are not ignored, but for those under ``outputs`` (the A/B's own) and
    those Python and pytest write as they run (bytecode, pytest's cache)."""
    leave_out = [f":(exclude,glob)**/{written}/**" for written in WRITTEN_BY_RUNNING]
    if outputs is not None and outputs.resolve().is_relative_to(root.resolve()):
        leave_out += [f":(exclude){outputs.resolve().relative_to(root.resolve())}"]
    return git(root, "ls-files", "--others", "--exclude-standard", "--", ".",
               *leave_out).splitlines()  # fmt: skip


def refuse_the_tree_under_test(root: Path, commit: str, ref: str, outputs: Path) -> None:
    """AbError when ``commit``'s files are those of the tree under test (tracked and untracked,
    but for the A/B's ``outputs``): A would be B."""
    if git_succeeds(root, "diff", "--quiet", commit, "--") and not untracked(root, outputs):
        raise AbError(
            f"A ({ref}, {commit[:12]}) is the tree under test, file for file: an A/A compares "
            "nothing; give the commit to compare with (the baseline's, or an older one)"
        )


def state(root: Path, outputs: Path) -> str:
    """An identity of the tree under test as it is on disk: its commit, its changes and its
    untracked files' names but for the A/B's ``outputs`` (a journal of blocks is resumed only on
    the same tree)."""
    digest = hashlib.sha256(git(root, "rev-parse", "HEAD").encode())
    digest.update(git(root, "diff", "HEAD", "--binary").encode())
    digest.update("\n".join(untracked(root, outputs)).encode())
    return digest.hexdigest()[:16]


@contextmanager
def base_worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary folder, removed on the way out."""
    folder = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
    tree = folder / "base"
    try:
        git(root, "worktree", "add", "--detach", str(tree), commit)
        yield tree
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)
