"""Output paths, checked before any work: a report written at the end of a six-minute GPU run
must not fail on a path that was wrong from the start.

``check_file`` and ``check_folder`` raise ``BadOutput`` with one line naming the option, the
path and what to do; a missing folder is fine where it can be created (the writers create it).
A pytest session checks its own (``session.outputs``), a command its ``--out`` (``cli``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
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


def write_whole(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: into a new file beside it, synced, then
    renamed over it (a path that is no regular file, such as /dev/stdout, is written as it
    is). OSError (a full disk, a read-only folder) leaves ``path`` as it was and no new file
    behind; ``disk_problem`` words it in one line."""
    path = Path(path)
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return path
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.writing-", dir=path.parent)
    try:
        try:
            _write_all(descriptor, text.encode("utf-8"))
            os.fsync(descriptor)
            os.fchmod(descriptor, 0o666 & ~_umask())  # mkstemp makes 0600; it is the user's
        finally:
            os.close(descriptor)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return path


def append_whole(path: Path | str, text: str) -> None:
    """Append ``text`` to ``path`` (a job summary), whole or not at all: on OSError the file is
    cut back to its length before."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        before = os.lseek(descriptor, 0, os.SEEK_END)
        try:
            _write_all(descriptor, text.encode("utf-8"))
        except OSError:
            with contextlib.suppress(OSError):  # a device (/dev/full) cannot be cut back
                os.ftruncate(descriptor, before)
            raise
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def disk_problem(error: OSError, what: str) -> str:
    """One line for a write that failed: ``what`` could not be written, why, and where."""
    where = f" ({error.filename})" if error.filename else ""
    return f"could not write {what}: {error.strerror or error}{where}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
