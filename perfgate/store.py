"""The baseline store: one folder of pytest-benchmark JSON runs per hardware key.

``baselines/<hardware key>/<machine id>/NNNN_name.json`` keeps pytest-benchmark's own layout
inside each hardware folder, so its tools still read the files. This module is the only one that
reads or writes run files:

- the newest run is the newest by its recorded datetime, across every subfolder of the key;
- a baseline set is the newest run and the runs saved just before it under the same name, in the
  same environment (at most ``MAX_SET_RUNS``);
- saving is atomic and exclusive: a run is written to a temporary file and linked to the next
  free number, so two saves never share a number and nothing is ever overwritten.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
import time
from pathlib import Path

from perfgate.benchmark import Run, RunFormatError, run_from_json

MAX_SET_RUNS = 5
RUN_FILE = re.compile(r"^(\d{4,})_(.*)\.json$")
SAVE_HINT = "record one with `pytest perf_tests --benchmark-save=NAME`"


class StoreError(Exception):
    """A run file or store folder that cannot be used; the message names it and what to do."""


class NoSuchRun(StoreError):
    """A RUN argument, or a hardware folder, that names no saved run."""


def load(path: Path) -> Run:
    """Read and check one run file; StoreError naming the file and what to do."""
    path = Path(path)
    return _load(path.resolve(), _stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except OSError as error:
        raise StoreError(f"cannot read run {path}: {error.strerror}") from error
    return status.st_mtime_ns, status.st_size


@functools.lru_cache(maxsize=256)
def _load(path: Path, stamp: tuple[int, int]) -> Run:  # stamp: re-read a file that changed
    restore = f"restore it from git (`git checkout -- {path}`) or move it out of the store"
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise StoreError(f"cannot read run {path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise StoreError(f"run {path} is not UTF-8 text ({error.reason}); {restore}") from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StoreError(
            f"run {path} is not valid JSON ({error.msg} at line {error.lineno}); it may be "
            f"truncated: {restore}"
        ) from error
    try:
        return run_from_json(data, path)
    except RunFormatError as error:
        raise StoreError(f"{error}; {restore}") from error


def run_files(folder: Path) -> list[Path]:
    """Every NNNN_name.json under a hardware folder (any subfolder), in no particular order."""
    if not folder.is_dir():
        return []
    return [p for p in folder.rglob("*.json") if RUN_FILE.match(p.name)]


def number_of(path: Path) -> int:
    return int(RUN_FILE.match(Path(path).name).group(1))


def saved_runs(folder: Path) -> list[Run]:
    """The runs of a hardware folder, oldest first by recorded datetime (then number)."""
    runs = [load(p) for p in run_files(folder)]
    return sorted(runs, key=lambda run: (run.datetime, number_of(run.path), str(run.path)))


def newest(folder: Path) -> Run | None:
    runs = saved_runs(folder)
    return runs[-1] if runs else None


def baseline_set(run: Run, runs: list[Run]) -> list[Run]:
    """``run`` and the runs saved just before it (in ``runs``, oldest first) under the same name
    and in the same environment, oldest first, at most MAX_SET_RUNS.

    Saving a baseline several times in a row (``--benchmark-save=cpu-default`` three times) makes
    a set, from which the gate learns how much the machine's sessions differ; another name, or
    a run in another environment, ends the set.
    """
    earlier = [r for r in runs if (r.datetime, number_of(r.path)) < (run.datetime, _num(run))]
    members = [run]
    for candidate in reversed(earlier):
        if len(members) == MAX_SET_RUNS or candidate.name != run.name:
            break
        if candidate.environment != run.environment:
            break
        members.insert(0, candidate)
    return members


def _num(run: Run) -> int:
    return number_of(run.path) if run.path else 1 << 30


def hardware_keys(root: Path) -> list[str]:
    """The hardware keys that have saved runs under a baseline root."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and run_files(p))


def no_runs_message(folder: Path) -> str:
    keys = hardware_keys(folder.parent)
    others = f"keys with runs there: {', '.join(keys)}" if keys else "it has no runs at all"
    return f"no baseline for this hardware ({folder.name}) in {folder.parent} ({others})"


def resolve(argument: str, folder: Path) -> Path:
    """The run file a RUN argument names: an existing path, or a run number (``3``, ``0003``)
    or a name fragment (``h100-full``) that names exactly one run in the hardware ``folder``."""
    path = Path(argument)
    if path.is_file():
        return path
    if path.suffix == ".json" or os.sep in argument:
        raise NoSuchRun(
            f"run file {path} does not exist; pass an existing pytest-benchmark JSON file, or a "
            f"run number such as 0001 from {folder}"
        )
    files = sorted(run_files(folder), key=lambda p: (number_of(p), str(p)))
    if not files:
        raise NoSuchRun(f"{no_runs_message(folder)}; {SAVE_HINT}, or pass a run file's path")
    hits = [p for p in files if _names(p, argument)]
    if len(hits) == 1:
        return hits[0]
    listing = ", ".join(p.name for p in (hits or files))
    if hits:
        raise StoreError(
            f"'{argument}' names several runs in {folder}: {listing}; be more specific"
        )
    raise NoSuchRun(f"no run '{argument}' in {folder}; saved runs there: {listing}")


def _names(path: Path, argument: str) -> bool:
    if argument.isdigit():
        return number_of(path) == int(argument)
    return argument.lower() in path.stem.lower()


def save(key_folder: Path, machine_id: str, name: str, run_json: dict) -> Path:
    """Write ``run_json`` as the next number under ``key_folder/machine_id``; returns its path.

    Numbers count across the whole hardware folder, so each number names one run of the key.
    The JSON goes to a temporary file first. A number is claimed by creating a claim file
    exclusively (two savers cannot both create it), checked free, and only then is the run
    linked to ``NNNN_name.json``: readers never see a half-written run, and no two saves share a
    number, whatever their names.
    """
    folder = key_folder / machine_id
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".saving-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(run_json, file, ensure_ascii=True, indent=4)
        for _ in range(1000):
            number = 1 + max((number_of(p) for p in run_files(key_folder)), default=0)
            target = folder / f"{number:04d}_{name}.json"
            if _link_if_free(temporary, target, key_folder, number):
                return target
        raise StoreError(f"could not find a free run number in {key_folder}")
    finally:
        os.unlink(temporary)


STALE_CLAIM_SECONDS = 60  # a claim is held for milliseconds; older ones are left by a crash


def _forget_stale(claim: Path) -> None:
    try:
        if time.time() - claim.stat().st_mtime > STALE_CLAIM_SECONDS:
            claim.unlink()
    except FileNotFoundError:
        pass


def _link_if_free(temporary: str, target: Path, key_folder: Path, number: int) -> bool:
    claim = key_folder / f".claim-{number:04d}"
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:  # another save is claiming this number right now
        _forget_stale(claim)
        time.sleep(0.01)
        return False
    try:
        if any(number_of(p) == number for p in run_files(key_folder)):
            return False  # taken by a save that finished between our look and our claim
        os.link(temporary, target)
        return True
    finally:
        os.unlink(claim)
