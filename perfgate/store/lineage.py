"""Whether a run can be a baseline that a nightly on any checkout of the project can A/B
against: its commit must be in the history of the repository it is saved into (an ancestor of
HEAD). A run of a commit that only a rebased or deleted branch held gives an A that no clone can
check out, so saving or promoting it is refused (``--benchmark-save`` keeps it in
``perfgate-results/unsaved/``). Where the run names no commit, or the folder is not in a git
repository, there is nothing to check against and the run is saved as before.

A run already kept whose commit no clone has may carry a note beside it (``note_of``:
``NNNN_name.note``, plain text: where its code is on the main line, which ``--base-ref`` to A/B
with); the nightly prints it when it cannot find the baseline's commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

NOT_IN_HISTORY = "not in this repository's history"
NOTE_SUFFIX = ".note"  # NNNN_name.note beside NNNN_name.json: a note on that run, for people


def _git(cwd: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(cwd), *arguments], capture_output=True, text=True)


def shallow_note(cwd: Path) -> str:
    """`` (this clone is shallow: ...)`` where git says the repository at ``cwd`` is a shallow
    clone (a commit may then be missing only from the clone), else nothing."""
    if _git(cwd, "rev-parse", "--is-shallow-repository").stdout.strip() != "true":
        return ""
    return " (this clone is shallow: fetch its full history, fetch-depth: 0)"


def not_in_history(commit: str | None, cwd: Path) -> str | None:
    """Why a run of ``commit`` cannot be a baseline of the repository at ``cwd`` (one clause),
    or None: it is an ancestor of HEAD, names no commit, or ``cwd`` is in no repository."""
    if not commit or _git(cwd, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        return None
    if _git(cwd, "merge-base", "--is-ancestor", commit, "HEAD").returncode == 0:
        return None
    clone = shallow_note(cwd)
    return (
        f"its commit {commit[:12]} is {NOT_IN_HISTORY} (not an ancestor of HEAD){clone}: a "
        "nightly could not check it out to A/B against; save a run of a commit on this "
        "branch"
    )


def note_of(run_file: Path | None) -> str | None:
    """The note kept beside a run file (``NNNN_name.note``), on one line; None without one."""
    if run_file is None:
        return None
    try:
        text = run_file.with_suffix(NOTE_SUFFIX).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return " ".join(text.split()) or None
