"""Reading runs: load and check one run file (once), list a hardware folder's runs oldest first,
and find the run a RUN argument names (a path, a run number or a name fragment)."""

from __future__ import annotations

import copy
import functools
import gzip
import json
import os
import re
from pathlib import Path

from perfgate import format as fmt
from perfgate.benchmark import Run, RunFormatError, run_from_json
from perfgate.fields import RUN_FORMAT, RunField, with_bounded_data
from perfgate.store import schema as run_schema

RUN_FILE = re.compile(r"^(\d{4,})_(.*)\.json$")
SAVE_HINT = "record one with `pytest --benchmark-save=NAME`"


class StoreError(Exception):
    """A run file or store folder that cannot be used; the message names it and what to do."""

    def __str__(self) -> str:  # it quotes stored text (names, paths): never a terminal control
        return fmt.terminal(super().__str__())


class NoSuchRun(StoreError):
    """A RUN argument, or a hardware folder, that names no saved run."""


def load(path: Path) -> Run:
    """Read and check one run file; StoreError naming the file and what to do. The run is named
    by the path it was found at (a store entry that is a symlink is named by the entry, not by
    what it links to: the entry is what to move out)."""
    path = Path(path)
    return _load(path.absolute(), _stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except OSError as error:
        raise StoreError(f"cannot read run {path}: {error.strerror}; {_restore(path)}") from error
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
    return _bounded_json(path.absolute(), _stamp(path))["benchmarks"]


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
    return migrated(data, path) if isinstance(data, dict) else data


def migrated(data: dict, path: Path | None) -> dict:
    """A run of any format as today's (``RUN_FORMAT``), the one migration every read goes
    through: a run of a newer format than this perfgate reads is refused in one line; format 0
    (an older perfgate, or pytest-benchmark alone) has the fields of format 1, which only added
    the version, and needs no change. Every run's per-round data is bounded as it is read (an
    older run, a merged one or a --benchmark-json may hold every round: hundreds of MB as
    Python floats, dropped as soon as it is parsed)."""
    info = data.get("machine_info")
    ours = info.get(RunField.PERFGATE) if isinstance(info, dict) else None
    version = ours.get(RunField.FORMAT, 0) if isinstance(ours, dict) else 0
    if not isinstance(version, int) or isinstance(version, bool) or version > RUN_FORMAT:
        raise StoreError(
            f"run {path} has format {version!r}, written by a newer perfgate than this one "
            f"(which reads formats 0 to {RUN_FORMAT}): upgrade perfgate"
        )
    return with_bounded_data(data)


def _restore(path: Path) -> str:
    """What to do with a run that cannot be read: a store's run (``NNNN_name.json``) may be in
    git; another file (``--benchmark-json``'s, an A/B's block) is written again."""
    if RUN_FILE.match(path.name):
        return f"restore it from git (`git checkout -- {path}`) or move it out of the store"
    return "write it again (run what wrote it), or pass another file"


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


def folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a folder although it is there (a symlink loop, a file, no
    permission); None when it can, or when it is missing (callers say what a missing one means)."""
    try:
        os.listdir(path)
    except FileNotFoundError:
        return None if not os.path.islink(path) else f"{path} is a symlink to nothing"
    except OSError as error:
        return f"{path} cannot be read as a folder: {error.strerror}"
    return None


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
        run_schema.check_table_stats(run, comparison_entries(run.path))
    except RunFormatError as error:
        raise StoreError(str(error)) from error


def hardware_keys(root: Path) -> list[str]:
    """The hardware keys that have saved runs under a baseline root."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and run_files(p))


def no_runs_message(folder: Path, per_hardware: bool = True) -> str:
    """Where no saved run was found: a hardware folder of a baseline root (and which keys have
    runs there), or a store without hardware folders (pytest-benchmark's own)."""
    if not per_hardware:
        return f"no saved run in {folder}"
    keys = hardware_keys(folder.parent)
    others = f"keys with runs there: {', '.join(keys)}" if keys else "it has no runs at all"
    return f"no baseline for this hardware ({folder.name}) in {folder.parent} ({others})"


def resolve(argument: str, folder: Path, per_hardware: bool = True) -> Path:
    """The run file a RUN argument names: an existing path, or a run number (``3``, ``0003``)
    or a name fragment (``h100-full``) that names exactly one run in the hardware ``folder``
    (``per_hardware``), or in a store without hardware folders."""
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
        raise NoSuchRun(
            f"{no_runs_message(folder, per_hardware)}; {SAVE_HINT}, or pass a run file's path"
        )
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


def read_json(path: Path) -> dict:
    """A run file's JSON, checked first as ``load`` checks it, from the same single read: every
    field as it is but the per-round data, bounded as a saved run's is (``KEPT_ROUNDS``)."""
    path = Path(path)
    load(path)
    return copy.deepcopy(_bounded_json(path.absolute(), _stamp(path)))


def read_results(path: Path) -> Run:
    """A session's ``--benchmark-json`` output (not a stored run), read and checked, gzipped
    where its name ends in .gz; StoreError naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        run = run_from_json(json.loads(data.decode("utf-8")), path)
        run_schema.check(run)
    except OSError as error:  # gzip.BadGzipFile too
        raise StoreError(f"cannot read {path}: {error.strerror or error}") from None
    except (ValueError, EOFError, RunFormatError) as error:
        raise StoreError(f"{path}: {error}") from None
    return run
