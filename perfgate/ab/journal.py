"""The journal of an A/B: its plan and every completed block, on disk as they complete, so an
A/B that is interrupted, stopped at its time limit or whose runner is preempted loses no
completed block, and ``--resume`` continues it with the same plan.

A folder (``ab-blocks/`` beside the A/B's results): ``journal.jsonl`` holds the plan on its first
line, then one line per completed block (lane, pair, tree, cases, the results file, seconds, and
the A/B's own process ids, which are not other processes on the GPU), then ``{"complete": true}``
once the A/B ended. Each line is synced to disk before the next block starts. The block files
are pytest-benchmark's ``--benchmark-json``, gzipped once read (``compact``), via the store.

One A/B at a time in a folder (``only_one``): a second one there is refused while the first
holds the lock beside it (``ab-blocks.lock``), which the system releases when the first ends,
even killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.blocks import not_written, without_our_processes
from perfgate.benchmark import Run
from perfgate.store import StoreError, read_results

NAME = "journal.jsonl"
FORMAT = 1
WHERE_ANY = ("gpus",)  # a plan resumed on other GPUs (another runner) is the same plan
# what a plan's fields are, for the line that refuses to resume another A/B
PLAN_FIELDS = {
    "base_commit": "commit of A",
    "cases": "cases",
    "blocks": "--blocks",
    "more_blocks": "--more-blocks",
    "pytest_args": "pytest arguments",
    "rounds_per_block": "--rounds-per-block",
}
_held: set[Path] = set()  # the folders this process holds (``only_one``)


@dataclass(frozen=True)
class Block:
    """One tree's turn in one pair of one lane (label A or B): the cases it runs."""

    lane: int
    pair: int
    label: str
    cases: tuple[str, ...]

    @property
    def key(self) -> tuple[int, int, str]:
        return self.lane, self.pair, self.label


@dataclass(frozen=True)
class Entry:
    """A completed block: its results and how long it took."""

    block: Block
    run: Run
    seconds: float


@contextlib.contextmanager
def only_one(folder: Path) -> Iterator[None]:
    """Within the block, this process is the only A/B (or nightly) in ``folder``: an exclusive
    lock on ``folder``'s lock file beside it, released when the block ends or the process does
    (even killed). AbError, one line, when another process holds it; held again by this process
    (the nightly's A/B), it is already ours."""
    key = folder.resolve()
    if key in _held:
        yield
        return
    lock = key.with_name(key.name + ".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise AbError(
            f"cannot write {lock}: {error.strerror}; give a results folder that can be written"
        ) from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip() or "?"
            raise AbError(
                f"another A/B (process {owner}) is running in {folder}: wait for it "
                "to end, or give this one another results folder (--out or "
                "--results)"
            ) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)
    finally:
        os.close(descriptor)  # releases the lock


def unfinished(folder: Path) -> bool:
    """Whether ``folder`` holds the journal of an A/B that did not end (``--resume`` continues
    it)."""
    path = folder / NAME
    lines = _lines(path) if path.is_file() else []
    return bool(lines) and not any(line.get("complete") for line in lines)


def check_start(folder: Path, resume: bool) -> None:
    """Before any work: ``resume`` needs a journal in ``folder``; a new A/B never drops an
    unfinished one (AbError, one line, either way)."""
    path = folder / NAME
    lines = _lines(path) if path.is_file() else []
    if resume and not lines:
        raise AbError(f"--resume: no A/B to continue in {folder}; run without --resume")
    if not resume and lines and not any(line.get("complete") for line in lines):
        raise AbError(
            f"{folder} holds an unfinished A/B: continue it with --resume, or remove "
            "that folder to start over"
        )


class Journal:
    """The completed blocks of one A/B, in ``folder``."""

    def __init__(self, folder: Path, plan: dict, entries: list[Entry]):
        self.folder, self.plan = folder, plan
        self.entries = {e.block.key: e for e in entries}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, folder: Path, plan: dict, resume: bool) -> Journal:
        """The journal of ``plan``: read back with ``resume`` (AbError when it is another
        A/B's), else a new one (``check_start`` refused to drop an unfinished one)."""
        lines = _lines(folder / NAME) if resume else []
        if resume:
            recorded = lines[0].get("plan") if lines else None
            if not _same(recorded, plan):
                raise AbError(
                    f"--resume: {_difference(recorded, plan)}; or remove {folder} and "
                    "run without --resume to start over"
                )
            entries = [
                _entry(folder, number, line)
                for number, line in enumerate(lines[1:], 2)
                if "pair" in line
            ]
            return cls(folder, plan, entries)
        folder.mkdir(parents=True, exist_ok=True)
        for old in [folder / NAME, *folder.glob("lane*-pair*")]:
            old.unlink(missing_ok=True)
        journal = cls(folder, plan, [])
        journal._append({"journal": FORMAT, "plan": plan})
        return journal

    def block_file(self, lane: int, pair: int, label: str, suffix: str) -> Path:
        return self.folder / f"lane{lane}-pair{pair}-{label}{suffix}"

    def compact(self, report: Path) -> Path:
        """``report`` (a block's results, read already) gzipped beside it, the plain file gone:
        it holds every round (22 micro-benchmarks took 0.5-0.8 GB plain; gzip's fastest level,
        ~2.4x smaller, ~0.5 s for 50 MB). A report that is not there stays so."""
        if not report.is_file():
            return report
        kept = report.with_name(report.name + ".gz")
        partial = kept.with_name(kept.name + ".partial")
        try:
            with open(report, "rb") as plain, gzip.open(partial, "wb", compresslevel=1) as packed:
                shutil.copyfileobj(plain, packed)
            os.replace(partial, kept)
            report.unlink()
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise not_written(kept, error) from None
        return kept

    def done(self, lane: int, pair: int, label: str) -> Entry | None:
        return self.entries.get((lane, pair, label))

    def record(self, entry: Entry, report: Path, pids: set[int]) -> None:
        """``entry`` completed (its results in ``report``): on disk before anything else."""
        with self._lock:
            block = entry.block
            self.entries[block.key] = entry
            self._append(
                {
                    "lane": block.lane,
                    "pair": block.pair,
                    "label": block.label,
                    "cases": list(block.cases),
                    "file": report.name,
                    "seconds": entry.seconds,
                    "pids": sorted(pids),
                }
            )

    def finish(self) -> None:
        with self._lock:
            self._append({"complete": True})

    def _append(self, line: dict) -> None:
        path = self.folder / NAME
        try:
            with open(path, "a", encoding="utf-8") as journal:
                journal.write(json.dumps(line) + "\n")
                journal.flush()
                os.fsync(journal.fileno())
        except OSError as error:
            raise not_written(path, error) from None


def _lines(path: Path) -> list[dict]:
    """The journal's lines; a last line cut short by a crash is left out."""
    try:
        content = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) else f"not UTF-8 text: {error.reason}"
        raise AbError(
            f"the journal {path} is not readable ({why}): remove {path.parent} to start over"
        ) from None
    found = []
    for text in content.splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            break
        if not isinstance(line, dict):
            raise AbError(f"{path} is not an A/B journal; remove its folder to start over")
        found.append(line)
    return found


def _same(recorded: object, plan: dict) -> bool:
    if not isinstance(recorded, dict):
        return False
    return _where_any_left_out(recorded) == json.loads(json.dumps(_where_any_left_out(plan)))


def _where_any_left_out(plan: dict) -> dict:
    return {key: value for key, value in plan.items() if key not in WHERE_ANY}


def _difference(recorded: object, plan: dict) -> str:
    """Why the A/B ``recorded`` in a journal is not ``plan``, and what to do, in words."""
    if not isinstance(recorded, dict):
        return "the journal holds no plan of an A/B"
    plan = json.loads(json.dumps(plan))
    if recorded.get("tree") != plan.get("tree"):
        return (
            "the tree under test is not as it was when the A/B began (a tracked or "
            "untracked file changed): put it back as it was"
        )
    changed = [words for key, words in PLAN_FIELDS.items() if recorded.get(key) != plan.get(key)]
    return f"the A/B in the journal is another one (other {', '.join(changed) or 'plan'})"


def _entry(folder: Path, number: int, line: dict) -> Entry:
    """The completed block of the journal's line ``number``; AbError naming what is wrong."""
    fields = {
        "lane": int,
        "pair": int,
        "label": str,
        "cases": list,
        "file": str,
        "seconds": (int, float),
        "pids": list,
    }
    wrong = [
        key
        for key, kind in fields.items()
        if isinstance(line.get(key), bool) or not isinstance(line.get(key), kind)
    ]
    if not wrong and Path(line["file"]).name != line["file"]:
        wrong = ["file"]
    if wrong:
        raise AbError(
            f"--resume: the journal in {folder} is damaged (line {number}: "
            f"{', '.join(wrong)} missing or of the wrong kind); remove that folder to "
            "start over"
        )
    try:
        run = read_results(folder / line["file"])
        block = Block(line["lane"], line["pair"], line["label"], tuple(map(str, line["cases"])))
        pids = {int(pid) for pid in line["pids"]}
        return Entry(block, without_our_processes(run, pids), float(line["seconds"]))
    except (TypeError, ValueError, StoreError) as error:
        raise AbError(
            f"--resume: the journal in {folder} is damaged (line {number}: {error}); "
            "remove that folder to start over"
        ) from None
