"""The two trees of an A/B: the repository (B, the tree under test, as it is on disk) and a
commit checked out into a temporary git worktree (A), removed on the way out whatever happens;
one left by an A/B that was killed (``kill -9``) is removed by the next A/B in the repository.
An A whose tracked files are the tree under test's is refused, whatever untracked files lie
beside them: an A/A compares nothing, and would override what the stored comparison found."""

from __future__ import annotations

import fcntl
import hashlib
import os
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
    listed = git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", ".", *leave_out)
    return [name for name in listed.split("\0") if name]  # -z: names as they are, unquoted


def refuse_the_tree_under_test(root: Path, commit: str, ref: str) -> None:
    """AbError when ``commit``'s tracked files are those of the tree under test: A would be B.
    Untracked files do not make them differ (a note, a log: nothing says a test reads them);
    a change to measure is committed, or added to git (``git add``)."""
    if git_succeeds(root, "diff", "--quiet", commit, "--"):
        raise AbError(
            f"A ({ref}, {commit[:12]}) is the tree under test, file for file (untracked files "
            "aside: `git add` a change to measure): an A/A compares nothing; give the commit to "
            "compare with (the baseline's, or an older one)"
        )


def state(root: Path, outputs: Path) -> str:
    """An identity of the tree under test as it is on disk: its commit, its changes and its
    untracked files (names and contents) but for the A/B's ``outputs`` (a journal of blocks is
    resumed only on the same tree)."""
    digest = hashlib.sha256(git(root, "rev-parse", "HEAD").encode())
    digest.update(git(root, "diff", "HEAD", "--binary").encode())
    for name in untracked(root, outputs):
        digest.update(f"\n{name}\n".encode())
        digest.update(_contents(root / name))
    return digest.hexdigest()[:16]


def _contents(path: Path) -> bytes:
    """A digest of an untracked file's contents (a symlink's target; why it cannot be read)."""
    if path.is_symlink():
        return os.readlink(path).encode(errors="surrogateescape")
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except OSError as error:  # a folder (a nested repository), a file that cannot be read
        return f"unreadable: {error.strerror}".encode()
    return digest.digest()


OURS = "perfgate-ab-"  # the prefix of A's temporary folders; the worktree is <folder>/base
OWNER = "owner.lock"  # in that folder, locked by the A/B that uses the worktree for its life


@contextmanager
def base_worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary folder, removed on the way out; its
    folder's lock file is held meanwhile, so another A/B knows it is in use."""
    prune_abandoned(root)
    folder = Path(tempfile.mkdtemp(prefix=OURS))
    tree = folder / "base"
    owner = os.open(folder / OWNER, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(owner, fcntl.LOCK_EX)  # a folder made just now: no one else holds it
        git(root, "worktree", "add", "--detach", str(tree), commit)
        yield tree
    finally:
        _remove(root, tree)
        os.close(owner)


def prune_abandoned(root: Path) -> None:
    """Remove the worktrees of A/Bs that ended without removing theirs (killed): ours by their
    folder's name, abandoned when no process holds their lock (or an older perfgate left none);
    then let git forget worktrees whose folders are gone."""
    listing = git(root, "worktree", "list", "--porcelain").splitlines()
    for line in listing:
        tree = Path(line.removeprefix("worktree ")) if line.startswith("worktree ") else None
        if tree is None or tree.name != "base" or not tree.parent.name.startswith(OURS):
            continue
        try:
            owner = os.open(tree.parent / OWNER, os.O_RDONLY)
        except OSError:  # no lock: an older perfgate's, or its folder is gone
            _remove(root, tree)
            continue
        try:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # in use
            continue
        finally:
            os.close(owner)
        _remove(root, tree)
    subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)


def _remove(root: Path, tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], capture_output=True
    )
    shutil.rmtree(tree.parent, ignore_errors=True)
    subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)
