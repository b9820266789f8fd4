"""The baseline store: one folder of pytest-benchmark JSON runs per hardware key.

``baselines/<hardware key>/<machine id>/NNNN_name.json`` keeps pytest-benchmark's own layout
inside each hardware folder, so its tools still read the files. This module is the only one that
reads or writes run files:

- every run is checked once, when loaded (``run_schema``), and named in one line when broken;
- the newest run is the newest by its recorded datetime (aware: a naive one is UTC), across
  every subfolder of the key, symlinked ones included; a run dated in the future is no baseline;
- which run is the baseline, and its set, is chosen in ``store.baseline``;
- saving is atomic and exclusive: a run is linked to the next free number from a file written
  before, so two saves never share a number and nothing is ever overwritten; claims and
  temporary files name their process (``owners``) and are removed once it is gone.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

from perfgate.benchmark import Run, RunFormatError, run_from_json, with_bounded_data
from perfgate.store import owners
from perfgate.store import schema as run_schema

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
    data = _bounded_json(path, stamp)
    try:
        run = run_from_json(data, path)
        run_schema.check(run)
    except RunFormatError as error:
        raise StoreError(f"{error}; {_restore(path)}") from error
    return run


def comparison_entries(path: Path) -> list:
    """The benchmark entries of a loaded run as pytest-benchmark's table reads them (every
    statistic, per-round data bounded), from the same single read as ``load``."""
    path = Path(path)
    return _bounded_json(path.resolve(), _stamp(path))["benchmarks"]


@functools.lru_cache(maxsize=4)  # the run just loaded, for comparison_entries
def _bounded_json(path: Path, stamp: tuple[int, int]) -> dict:
    """The file's JSON with every benchmark's per-round data bounded (an older run may hold
    every round: hundreds of MB as Python floats, dropped here as soon as it is parsed)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise StoreError(f"cannot read run {path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise StoreError(
            f"run {path} is not UTF-8 text ({error.reason}); {_restore(path)}"
        ) from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StoreError(
            f"run {path} is not valid JSON ({error.msg} at line {error.lineno}); it may be "
            f"truncated: {_restore(path)}"
        ) from error
    return with_bounded_data(data) if isinstance(data, dict) else data


def _restore(path: Path) -> str:
    return f"restore it from git (`git checkout -- {path}`) or move it out of the store"


def run_files(folder: Path) -> list[Path]:
    """Every NNNN_name.json under a hardware folder (any subfolder, symlinked ones followed
    once), in no particular order."""
    if not folder.is_dir():
        return []
    found, seen = [], set()
    for place, folders, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(place)
        if real in seen:  # a symlink back to a folder already walked
            folders.clear()
            continue
        seen.add(real)
        found += [Path(place) / name for name in files if RUN_FILE.match(name)]
    return found


def number_of(path: Path) -> int:
    return int(RUN_FILE.match(Path(path).name).group(1))


def saved_runs(folder: Path) -> list[Run]:
    """The runs of a hardware folder, oldest first by recorded datetime (then number)."""
    runs = [load(p) for p in run_files(folder)]
    return sorted(
        runs, key=lambda run: (run_schema.recorded_at(run), number_of(run.path), str(run.path))
    )


def future_message(run: Run) -> str:
    return (
        f"run {run.path} is dated {run.datetime}, in the future: it is not used as a "
        "baseline; fix its datetime (or the clock of the machine that saved it)"
    )


def check_for_comparison_table(run: Run) -> None:
    """StoreError unless pytest-benchmark's comparison table can show ``run`` (its stats)."""
    try:
        entries = json.loads(run.path.read_text(encoding="utf-8"))["benchmarks"]
        run_schema.check_table_stats(run, entries)
    except RunFormatError as error:
        raise StoreError(str(error)) from error


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


SAVE_NAME_BYTES = 120  # with "NNNN_", ".json" and a timestamp, well inside a 255-byte name
SAVE_NAME = re.compile(r"^[^\x00-\x1f\x7f/\\:*?<>|]+$")


def check_save_name(name: str) -> None:
    """StoreError unless ``name`` can be a run's name: a file name that RUN_FILE reads back."""
    if not SAVE_NAME.match(name) or name.strip() != name or name.startswith("."):
        raise StoreError(
            f"--benchmark-save {name!r}: a name may not start with '.', hold control characters "
            "(newlines, tabs), /\\:*?<>| or surrounding spaces; use letters, digits, - and _"
        )
    if len(name.encode("utf-8")) > SAVE_NAME_BYTES:
        raise StoreError(
            f"--benchmark-save: the name is {len(name.encode())} bytes long; at most "
            f"{SAVE_NAME_BYTES} fit in a file name, give a shorter one"
        )


def save(key_folder: Path, machine_id: str, name: str, run_json: dict) -> Path:
    """Write ``run_json`` as the next number under ``key_folder/machine_id``; returns its path."""
    folder = machine_folder(key_folder, machine_id)
    temporary = owners.write_temporary(folder, json.dumps(run_json, ensure_ascii=True, indent=4))
    try:
        return save_file(key_folder, machine_id, name, temporary)
    finally:
        temporary.unlink(missing_ok=True)


def save_file(key_folder: Path, machine_id: str, name: str, source: Path) -> Path:
    """Link the run file ``source`` into the store as the next number under
    ``key_folder/machine_id`` (copied first when it lives on another filesystem); returns its
    path. OSError (a full or read-only disk) leaves ``source`` where it is.

    Numbers count across the whole hardware folder, so each number names one run of the key. A
    number is claimed by creating a claim file exclusively (two savers cannot both create it;
    a claim whose process is gone is removed), checked free, and only then is the run linked to
    ``NNNN_name.json``: readers never see a half-written run, and no two saves share a number.
    """
    check_save_name(name)
    folder = machine_folder(key_folder, machine_id)
    owners.clean_orphans(key_folder, folder)
    copy = None
    try:
        for _ in range(100):
            number = _next_free_number(key_folder)
            target = folder / f"{number:04d}_{name}.json"
            claimed = owners.claim(key_folder, number)
            if claimed is None:
                continue
            try:
                if any(number_of(p) == number for p in run_files(key_folder)):
                    continue  # taken by a save that finished between our look and our claim
                copy = copy or owners.linkable(source, folder)
                os.link(copy, target)
                return target
            finally:
                claimed.unlink(missing_ok=True)
        raise StoreError(f"could not find a free run number in {key_folder}")
    finally:
        if copy is not None and copy != source:
            copy.unlink(missing_ok=True)


def machine_folder(key_folder: Path, machine_id: str) -> Path:
    """``key_folder/machine_id``, created when missing; a symlink to a folder is followed, one
    to nothing (or to a file) is a StoreError that says so."""
    folder = key_folder / machine_id
    if folder.is_symlink() and not folder.is_dir():
        raise StoreError(
            f"{folder} is a symlink to {os.readlink(folder)}, which is not a folder; point it "
            "at a folder or remove it"
        )
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder} is a file, not a folder of runs; move it away")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _next_free_number(key_folder: Path) -> int:
    claims = [int(p.name[7:]) for p in key_folder.glob(".claim-*") if p.name[7:].isdigit()]
    return 1 + max([number_of(p) for p in run_files(key_folder)] + claims, default=0)


def read_json(path: Path) -> dict:
    """A run file's JSON as it is, checked first as ``load`` checks it."""
    load(path)
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_new(path: Path, run_json: dict) -> Path:
    """Write a run to ``path``, a new file (never over another); StoreError when it exists."""
    path = Path(path)
    text = json.dumps(run_json, ensure_ascii=True, indent=4)
    try:
        temporary = owners.write_temporary(path.parent, text)
        try:
            os.link(temporary, path)  # FileExistsError: nothing is overwritten
        finally:
            temporary.unlink(missing_ok=True)
    except FileExistsError:
        raise StoreError(f"{path} exists; name a new file for the merged run") from None
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror}") from None
    return path
