"""``--benchmark-save``, put aside first: nothing measured is lost to a full disk or a Ctrl-C.

The run is first written to ``perfgate-results/unsaved/`` (or, when that cannot be written, the
system's temporary folder); only then is it linked into the store, and the copy put aside is
removed. Any failure leaves the run where it was put aside, and says so in one line. SIGINT and
SIGTERM that arrive meanwhile are held until the save is done.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perfgate import store
from perfgate.store import owners
from perfgate.store.writing import run_text

UNSAVED = Path("perfgate-results") / "unsaved"
SAVE_FAILED = 7  # exit status: --benchmark-save could not save the run (docs: exit codes)


@dataclass
class Outcome:
    """What became of a run: saved to ``saved``, or kept in ``kept``; ``line`` says which."""

    line: str
    saved: Path | None = None
    kept: Path | None = None
    failed: bool = False
    interrupted: bool = False


def save_run(run_json: dict, name: str, root: Path, unclean: str | None, store_at) -> Outcome:
    """Put ``run_json`` aside under ``root``, then (unless ``unclean`` says why not) save it
    with ``store_at(path)`` (which returns the saved path)."""
    with held_signals() as received:
        outcome = _save(run_json, name, root, unclean, store_at)
    if received:
        outcome.interrupted = True
        outcome.line += f" (interrupted by {received[0]} during the save, which was finished)"
    return outcome


def _save(run_json: dict, name: str, root: Path, unclean: str | None, store_at) -> Outcome:
    try:
        kept = put_aside(run_json, name, root)
    except OSError as error:
        return Outcome(f"perfgate: the run could NOT be kept: {_why(error)}", failed=True)
    if unclean:
        return Outcome(
            f"perfgate: NOT saved as a baseline: {unclean}; the run is in {kept}", kept=kept
        )
    try:
        saved = store_at(kept)
    except (OSError, store.StoreError) as error:
        return Outcome(
            f"perfgate: NOT saved to the store: {_why(error)}; the run is kept in {kept} (free "
            "the space or fix the folder, then save again or copy it in as NNNN_name.json)",
            kept=kept,
            failed=True,
        )
    kept.unlink(missing_ok=True)
    return Outcome(f"perfgate: saved {saved}", saved=saved)


def put_aside(run_json: dict, name: str, root: Path) -> Path:
    """Write the run to ``root/perfgate-results/unsaved/<UTC time>_<name>.json`` (a new file,
    never over another), or to the temporary folder when that fails; returns its path."""
    text = run_text(run_json)  # as the store writes it: what it can save, this can keep
    try:
        store.check_save_name(name)
    except store.StoreError:
        name = "run"  # checked before the session; a name that slipped through still keeps it
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    try:
        return _write_new(Path(root) / UNSAVED, stamp, name, text)
    except OSError as error:
        try:
            return _write_new(Path(tempfile.gettempdir()) / "perfgate-unsaved", stamp, name, text)
        except OSError:
            raise error from None


def _write_new(folder: Path, stamp: str, name: str, text: str) -> Path:
    """Write ``text`` under a temporary name first, then link it to the first free
    ``<stamp>[-N]_<name>.json``: a kill while writing leaves no file named like a whole run (the
    temporary file names its process, and the next save removes it once that is gone)."""
    folder.mkdir(parents=True, exist_ok=True)
    owners.clean_orphans(folder, folder)
    temporary = owners.write_temporary(folder, text)
    try:
        for attempt in range(1000):
            path = folder / f"{stamp}{f'-{attempt}' if attempt else ''}_{name}.json"
            try:
                os.link(temporary, path)  # never over another run
                return path
            except FileExistsError:
                continue
        raise FileExistsError(f"{folder} has 1000 runs saved at {stamp}")
    finally:
        temporary.unlink(missing_ok=True)


def _why(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}"
    return str(error)


@contextlib.contextmanager
def held_signals():
    """Hold SIGINT and SIGTERM until the block ends; yields the list of signals received."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    wanted = (signal.SIGINT, signal.SIGTERM)
    before = {number: signal.getsignal(number) for number in wanted}

    def hold(number, frame):
        received.append(signal.Signals(number).name)

    for number in wanted:
        signal.signal(number, hold)
    try:
        yield received
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
