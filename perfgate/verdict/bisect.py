"""What ``perfgate bisect`` answers ``git bisect run`` for one commit, from the one judge's
verdicts on its cases (``step_of``: GOOD, BAD or SKIP, pure), and the step as its log keeps it
(``StepRow``, typed, in the versioned format of ``verdict.rows``).

BAD when a case is slower (a regression, confirmed or not: the bisection measures GOOD again
itself); SKIP when none is and a case is not gated (its rounds cannot decide), or no case was
judged at all; GOOD otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from perfgate.verdict import rows
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.rows import GateRow, RowsError

FILE = rows.Kind("bisect step log", 1)  # steps.jsonl: one file of rows a line
UNCLEAR = frozenset({Verdict.NOT_GATED, Verdict.UNDECIDED})  # neither slower nor shown not to be


class Step(IntEnum):
    """The answer to ``git bisect run``, as its exit status."""

    GOOD = 0
    BAD = 1
    SKIP = 125


def unclear(verdicts: Iterable[Verdict]) -> bool:
    """Whether a case is neither slower nor shown not to be (one look can mislead: measure
    again)."""
    return any(verdict in UNCLEAR for verdict in verdicts)


def step_of(verdicts: Iterable[Verdict]) -> Step:
    """GOOD, BAD or SKIP for a commit whose cases the judge gave ``verdicts``."""
    verdicts = list(verdicts)
    if any(verdict.slower for verdict in verdicts):
        return Step.BAD
    return Step.SKIP if not verdicts or unclear(verdicts) else Step.GOOD


class Said(str, Enum):
    """What a line of the log says of its commit."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    REFERENCE = "GOOD (reference)"  # GOOD itself, measured first
    UNCLEAR = "unclear"  # measured once more next
    BAD_AT_FIRST = "bad?"  # against GOOD at the start; GOOD is measured again next

    @classmethod
    def of(cls, step: Step) -> Said:
        return cls(step.name.lower())


@dataclass(frozen=True)
class StepRow:
    """One line of the log: a commit, what it was said to be and why, and its cases' verdicts."""

    commit: str
    subject: str
    said: Said
    reason: str = ""
    cases: list[GateRow] = field(default_factory=list)

    def as_json(self) -> dict:
        cases = [case.as_json() for case in self.cases]
        head = {"commit": self.commit, "subject": self.subject, "said": self.said.value}
        return rows.written(FILE, cases, **head, reason=self.reason)


def step_row(data: object) -> StepRow:
    """One line of the log, read; RowsError (one line) for a line this perfgate cannot read."""
    data = rows.read(FILE, data)
    try:
        said = Said(data.get("said"))
    except ValueError:
        raise RowsError(f"{FILE.name}: {data.get('said')!r} is no step's answer") from None
    text = [data.get(key, "") for key in ("commit", "subject", "reason")]
    if not all(isinstance(value, str) for value in text):
        raise RowsError(f"{FILE.name}: commit, subject and reason must be text")
    cases = [rows.row(entry, index) for index, entry in enumerate(data["rows"])]
    return StepRow(text[0], text[1], said, text[2], cases)
