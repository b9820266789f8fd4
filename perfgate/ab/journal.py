"""The journal of an A/B: its plan and every completed block, on disk as they complete, so an
A/B that is interrupted, stopped at its time limit or whose runner is preempted loses no
completed block, and ``--resume`` continues it with the same plan.

A folder (``ab-blocks/`` beside the A/B's results): ``journal.jsonl`` holds the plan on its first
line, then one line per completed block (lane, pair, tree, cases, the results file, seconds, and
the A/B's own process ids, which are not other processes on the GPU), then ``{"complete": true}``
once the A/B ended. Each line is synced to disk before the next block starts. The block files
are pytest-benchmark's ``--benchmark-json``, read through the store.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.blocks import without_our_processes
from perfgate.benchmark import Run
from perfgate.store import StoreError, read_results

NAME = "journal.jsonl"
FORMAT = 1
WHERE_ANY = ("gpus",)  # a plan resumed on other GPUs (another runner) is the same plan


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


def check_start(folder: Path, resume: bool) -> None:
    """Before any work: ``resume`` needs a journal in ``folder``; a new A/B never drops an
    unfinished one (AbError, one line, either way)."""
    path = folder / NAME
    lines = _lines(path) if path.is_file() else []
    if resume and not lines:
        raise AbError(f"--resume: no A/B to continue in {folder}; run without --resume")
    if not resume and lines and not any(line.get("complete") for line in lines):
        raise AbError(f"{folder} holds an unfinished A/B: continue it with --resume, or remove "
                      "that folder to start over")  # fmt: skip


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
            if not lines or not _same(lines[0].get("plan"), plan):
                raise AbError(f"--resume: the A/B in {folder} is another one (other commits, "
                              "cases or blocks); remove that folder and run without --resume "
                              "to start over")  # fmt: skip
            return cls(folder, plan, [_entry(folder, line) for line in lines[1:] if "pair" in line])
        folder.mkdir(parents=True, exist_ok=True)
        for old in [folder / NAME, *folder.glob("lane*-pair*")]:
            old.unlink(missing_ok=True)
        journal = cls(folder, plan, [])
        journal._append({"journal": FORMAT, "plan": plan})
        return journal

    def block_file(self, lane: int, pair: int, label: str, suffix: str) -> Path:
        return self.folder / f"lane{lane}-pair{pair}-{label}{suffix}"

    def done(self, lane: int, pair: int, label: str) -> Entry | None:
        return self.entries.get((lane, pair, label))

    def record(self, entry: Entry, report: Path, pids: set[int]) -> None:
        """``entry`` completed (its results in ``report``): on disk before anything else."""
        with self._lock:
            block = entry.block
            self.entries[block.key] = entry
            self._append({"lane": block.lane, "pair": block.pair, "label": block.label,
                          "cases": list(block.cases), "file": report.name,
                          "seconds": entry.seconds, "pids": sorted(pids)})  # fmt: skip

    def finish(self) -> None:
        with self._lock:
            self._append({"complete": True})

    def _append(self, line: dict) -> None:
        with open(self.folder / NAME, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(line) + "\n")
            journal.flush()
            os.fsync(journal.fileno())


def _lines(path: Path) -> list[dict]:
    """The journal's lines; a last line cut short by a crash is left out."""
    found = []
    for text in path.read_text(encoding="utf-8").splitlines():
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
    strip = lambda p: {k: v for k, v in p.items() if k not in WHERE_ANY}  # noqa: E731
    return strip(recorded) == json.loads(json.dumps(strip(plan)))


def _entry(folder: Path, line: dict) -> Entry:
    try:
        run = read_results(folder / line["file"])
        block = Block(int(line["lane"]), int(line["pair"]), str(line["label"]),
                      tuple(line["cases"]))  # fmt: skip
        return Entry(block, without_our_processes(run, set(line["pids"])), float(line["seconds"]))
    except (KeyError, TypeError, ValueError, StoreError) as error:
        raise AbError(f"--resume: the journal in {folder} is damaged ({error}); remove that "
                      "folder to start over") from None  # fmt: skip
