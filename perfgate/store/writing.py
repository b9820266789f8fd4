"""Writing runs: a save is atomic and exclusive (the next free number, claimed first; nothing is
ever overwritten), a merged run goes to a new file, a worker's run to its --benchmark-json."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from perfgate.fields import unserializable
from perfgate.outputs import write_whole
from perfgate.store import owners
from perfgate.store.reading import StoreError, number_of, run_files
from perfgate.store.schema import folder_name_problem

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
    temporary = owners.write_temporary(folder, run_text(run_json))
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
    if problem := folder_name_problem(machine_id):
        raise StoreError(f"the run's machine id {problem}; the run is not saved outside the store")
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


def write_new(path: Path, run_json: dict) -> Path:
    """Write a run to ``path``, a new file (never over another); StoreError when it exists."""
    path = Path(path)
    try:
        temporary = owners.write_temporary(path.parent, run_text(run_json))
        try:
            os.link(temporary, path)  # FileExistsError: nothing is overwritten
        finally:
            temporary.unlink(missing_ok=True)
    except FileExistsError:
        raise StoreError(f"{path} exists; name a new file for the merged run") from None
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror}") from None
    return path


def write_json(target, run_json: dict) -> None:
    """Write a run to ``target``, a path or a binary file object (pytest-benchmark before 5.3
    opens its --benchmark-json file itself)."""
    text = run_text(run_json)
    if hasattr(target, "write"):
        target.write(text.encode())
        target.flush()
    else:
        write_whole(Path(target), text)  # a full disk leaves no half-written file


def run_text(run_json: dict) -> str:
    """A run as JSON text, written as pytest-benchmark writes it: a value JSON cannot hold (a
    function a test is parametrized with) as ``UNSERIALIZABLE[repr]``, so any run can be saved."""
    return json.dumps(run_json, ensure_ascii=True, indent=4, default=unserializable)
