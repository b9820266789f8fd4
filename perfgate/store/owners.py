"""Files owned by a live process: the store's claims and temporary files.

A claim or temporary file names its owner: host, pid and the process's start time (so a pid
reused after a crash is not mistaken for the owner). A file whose owner on this host is gone is
left over from a crash (``kill -9``, a power cut) and may be removed; one from another host
(a shared store) is trusted for ``FOREIGN_SECONDS`` after its last change, whatever its mtime
says about the future.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

FOREIGN_SECONDS = 60  # a claim is held for milliseconds; one this old is left by a crash


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), "" where unknown; None when
    no such process exists."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return fields[19]  # field 22 of proc(5); the two before ")" are dropped
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else _alive_elsewhere(pid)
    except (OSError, IndexError):
        return ""


def _alive_elsewhere(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass  # exists, owned by another user
    return ""


def token() -> str:
    """This process as an owner: ``host pid start``."""
    return f"{socket.gethostname()} {os.getpid()} {_start_time(os.getpid())}"


def file_tag() -> str:
    """This process for a file name: ``pid-start`` (letters a file name may hold)."""
    return f"{os.getpid()}-{_start_time(os.getpid()) or 0}"


def alive(owner: str, changed: float) -> bool:
    """Whether ``owner`` (a ``token()``) may still use its file, last changed at ``changed``."""
    host, _, rest = owner.partition(" ")
    pid_text, _, start = rest.partition(" ")
    if host != socket.gethostname() or not pid_text.isdigit():
        return abs(time.time() - changed) < FOREIGN_SECONDS
    now = _start_time(int(pid_text))
    return now is not None and (not now or not start or now == start)


def claim_alive(path: Path) -> bool:
    """A claim file's owner is alive (a claim being written counts as alive)."""
    try:
        text, changed = path.read_text(encoding="utf-8"), path.stat().st_mtime
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        return True
    return alive(text.strip(), changed) if text.strip() else _fresh(changed)


def tagged_alive(path: Path) -> bool:
    """A temporary file named ``.saving-<pid>-<start>-...``: its owner is alive."""
    parts = path.name.split("-")
    if len(parts) < 4 or not parts[1].isdigit():
        return _fresh(_mtime(path))
    start = "" if parts[2] == "0" else parts[2]
    return alive(f"{socket.gethostname()} {parts[1]} {start}", _mtime(path))


def _fresh(changed: float) -> bool:
    return abs(time.time() - changed) < FOREIGN_SECONDS


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


def remove_if_orphaned(path: Path, alive_check=claim_alive) -> None:
    """Remove ``path`` when its owner is gone; never fails for a file already removed."""
    if not alive_check(path):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def claim(key_folder: Path, number: int) -> Path | None:
    """The claim file of ``number``, created exclusively with its owner inside; None when
    another live save holds it (one whose owner is gone is removed first)."""
    claim = key_folder / f".claim-{number:04d}"
    owner = key_folder / f".saving-{file_tag()}-claim-{os.urandom(4).hex()}"
    owner.write_text(token(), encoding="utf-8")
    try:
        os.link(owner, claim)  # exclusive, and never seen without its owner
        return claim
    except FileExistsError:
        remove_if_orphaned(claim)
        return None
    finally:
        owner.unlink(missing_ok=True)


def clean_orphans(key_folder: Path, folder: Path) -> None:
    """Remove claims and temporary files whose process is gone (left by a kill or a crash)."""
    for claim in key_folder.glob(".claim-*"):
        remove_if_orphaned(claim)
    for place in {key_folder, folder}:
        for temporary in place.glob(".saving-*"):
            remove_if_orphaned(temporary, tagged_alive)


def write_temporary(folder: Path, text: str) -> Path:
    """A new ``.saving-<owner>-*.json`` in ``folder`` holding ``text``, with the user's umask."""
    handle, name = tempfile.mkstemp(prefix=f".saving-{file_tag()}-", suffix=".json", dir=folder)
    path = Path(name)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        fill(file, path, text, mode=0o666 & ~umask())  # mkstemp makes 0600; a run is for all
    return path


def fill(file, path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` into ``file``, just created at ``path``, and sync it to disk; on any
    failure (a full disk, a Ctrl-C) the file is removed: no half-written run stays."""
    try:
        if mode is not None:
            os.fchmod(file.fileno(), mode)
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def umask() -> int:
    """This process's umask (read by setting it, then set back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def linkable(source: Path, folder: Path) -> Path:
    """``source`` itself when it can be hard-linked into ``folder``, else a copy inside it."""
    probe = folder / f".saving-{file_tag()}-probe-{os.urandom(4).hex()}.json"
    try:
        os.link(source, probe)
    except OSError:  # another filesystem, or no hard links there
        return write_temporary(folder, Path(source).read_text(encoding="utf-8"))
    probe.unlink()
    return Path(source)
