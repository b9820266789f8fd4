"""Output paths, checked before any work: a report written at the end of a six-minute GPU run
must not fail on a path that was wrong from the start.

``check_file`` and ``check_folder`` raise ``BadOutput`` with one line naming the option, the
path and what to do; a missing folder is fine where it can be created (the writers create it).
A pytest session checks its own (``session.outputs``), a command its ``--out`` (``cli``).
"""

from __future__ import annotations

import os
from pathlib import Path


class BadOutput(Exception):
    """An output path that cannot be written; the message is one line naming the option."""


def check_file(path: Path | str, option: str, create_folder: bool = False) -> Path:
    """``path`` as a file to write: not a folder, in a folder that is (or can be made)
    writable; ``create_folder`` creates that folder now (for writers that do not)."""
    path = Path(path)
    if str(path) == "":
        raise BadOutput(f"{option} is empty; name a file")
    if path.is_dir():
        raise BadOutput(f"{option} {path} is a folder; name a file (e.g. {path / 'out.json'})")
    _writable_folder(path.parent, option, path, create_folder)
    if path.exists() and not os.access(path, os.W_OK):
        raise BadOutput(f"{option} {path} cannot be written (read-only); name another file")
    return path


def check_folder(path: Path | str, option: str) -> Path:
    """``path`` as a folder to write into: not a file, writable (or creatable)."""
    path = Path(path)
    if str(path) == "":
        raise BadOutput(f"{option} is empty; name a folder")
    if path.exists() and not path.is_dir():
        raise BadOutput(f"{option} {path} is a file, not a folder; name a folder for the output")
    _writable_folder(path, option, path, False)
    return path


def _writable_folder(folder: Path, option: str, path: Path, create: bool) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise BadOutput(f"{option} {path}: {existing} is a file, not a folder; name another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadOutput(
            f"{option} {path}: {existing} cannot be written (read-only, or not yours); name "
            "another path"
        )
    if not create:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadOutput(f"{option} {path}: cannot create {folder}: {error.strerror}") from error


def gate_twin(report: Path) -> Path:
    """The JSON twin of the gate's markdown summary: ``gate.md`` -> ``gate.json``."""
    return Path(report).with_suffix(".json")
