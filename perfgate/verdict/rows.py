"""A verdict as perfgate stores it: ``GateRow``, typed, and the files of rows, versioned. Every
such file (``gate.json``, ``ab.json``, bisect's steps) is ``{"format": N, ...its head..., "rows":
[row, ...]}``, written by ``written`` and checked by ``read``, which refuses a format of another
kind or version in one line (as asv's ``load_json`` checks ``api_version``): a file of a newer
perfgate says to upgrade. The writer (``as_json``) and the one reader (``from_json``) of gate.json
stand side by side; the nightly, the dashboard and the PR comment read rows only through
``from_json``, never by string keys.

gate.json, format 1: ``{"format": 1, "rows": [row, ...]}``. Format 0 (before the version): a bare
list of the same rows without ``reason`` and ``shift``; read through ``_migrated``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason

KEY = "format"


class RowsError(ValueError):
    """A file of rows that this version cannot read; one line saying what is wrong."""


@dataclass(frozen=True)
class Kind:
    """A kind of file of rows: its name, as a message names it, and the format this perfgate
    writes; it reads ``oldest`` to ``version`` (older ones migrated by their reader)."""

    name: str
    version: int
    oldest: int | None = None


GATE = Kind("gate summary", 1, oldest=0)  # gate.json
AB = Kind("A/B result", 1)  # ab.json: its rows, and what the A/B did (head)
FORMAT = GATE.version


def written(kind: Kind, rows: list[dict], **head: object) -> dict:
    """A file of ``kind``: its format, its ``head`` (what the whole file says) and its rows."""
    return {KEY: kind.version, **head, "rows": rows}


def read(kind: Kind, data: object) -> dict:
    """``data`` (parsed JSON) as a file of ``kind``; RowsError in one line when it is none, or of a
    format this perfgate does not read."""
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise RowsError(f"not a perfgate {kind.name} (an object with {KEY!r} and 'rows')")
    version = data.get(KEY)
    oldest = kind.version if kind.oldest is None else kind.oldest
    if isinstance(version, int) and not isinstance(version, bool) and version > kind.version:
        newer = f"{kind.name} of format {version}, newer than this perfgate reads ({kind.version})"
        raise RowsError(f"{newer}: upgrade perfgate")
    if not isinstance(version, int) or isinstance(version, bool) or version < oldest:
        known = f"this perfgate reads {oldest} to {kind.version}"
        raise RowsError(f"{kind.name} of an unknown format {version!r}; {known}")
    return data


def rows_of(kind: Kind, data: object) -> tuple[dict, list[GateRow]]:
    """A file of ``kind`` in this format, read: (its head, its rows); RowsError in one line."""
    data = read(kind, data)
    head = {key: value for key, value in data.items() if key not in (KEY, "rows")}
    return head, [row(entry, index) for index, entry in enumerate(data["rows"])]


@dataclass(frozen=True)
class GateRow:
    """One case's verdict: its words (``verdict``, ``reason``, ``message``), the medians
    (seconds) and change (%) it rests on, the threshold (fraction) and where it came from, and
    the notes (``clocks``: power-limited; ``gated_on``: what decided a case other than time;
    ``shift``: the session's machine-wide shift). A counted case has its instructions per call
    instead of medians, and its change (%) is theirs. A case judged on its rounds or block pairs
    has the p-value that it is slower; on block pairs (the A/B), how many pairs."""

    name: str
    verdict: Verdict
    message: str = ""
    reason: Reason | None = None
    family: str | None = None
    threshold: float | None = None
    threshold_source: str | None = None
    baseline_median_s: float | None = None
    current_median_s: float | None = None
    change_percent: float | None = None
    ratio_low: float | None = None  # the ratio's interval (current/baseline), where it has one
    ratio_high: float | None = None
    clocks: str | None = None
    gated_on: str | None = None
    shift: str | None = None
    baseline_instructions: float | None = None
    current_instructions: float | None = None
    p_value: float | None = None
    pairs: int | None = None

    @property
    def gated(self) -> bool:
        return self.verdict.gated

    @classmethod
    def of(cls, result: GateResult) -> GateRow:
        c = result.comparison
        low, high = (
            (c.ratio_low, c.ratio_high) if c and math.isfinite(c.ratio_high) else (None, None)
        )
        counted = result.instructions or (None, None)
        change = c.change_percent if c else None
        if result.instructions:
            change = (counted[1] / counted[0] - 1.0) * 100.0
        return cls(
            result.name,
            result.verdict,
            result.message,
            result.reason,
            result.family,
            None if result.threshold is None else float(result.threshold),  # a plain number
            result.threshold_source,
            c.baseline_median if c else None,
            c.current_median if c else None,
            change,
            low,
            high,
            result.clocks,
            result.gated_on,
            result.shift,
            *counted,
            p_value=c.p_value if c and math.isfinite(c.p_value) else None,
            pairs=c.n_baseline if c and c.paired else None,
        )

    def as_json(self) -> dict:
        row = asdict(self)
        row["verdict"] = self.verdict.value
        row["reason"] = self.reason.value if self.reason else None
        row["gated"] = self.gated  # for readers of the file that are not perfgate
        return row


def as_json(rows: list[GateRow]) -> dict:
    return written(GATE, [row.as_json() for row in rows])


_TEXT = ("name", "message", "family", "threshold_source", "clocks", "gated_on", "shift")
_NUMBERS = (
    "threshold",
    "baseline_median_s",
    "current_median_s",
    "change_percent",
    "ratio_low",
    "ratio_high",
    "baseline_instructions",
    "current_instructions",
    "p_value",
)


def from_json(data: object) -> list[GateRow]:
    """The rows of a gate.json (format 0 or 1); RowsError naming the first bad row or field."""
    if isinstance(data, list):
        data = {KEY: 0, "rows": data}
    data = read(GATE, data)
    entries = data["rows"] if data[KEY] == FORMAT else [_migrated(e) for e in data["rows"]]
    return [row(entry, index) for index, entry in enumerate(entries)]


# Format 0 said why a case was not gated in its message only; the one migration reads it there.
_FORMAT_0_REASONS = (
    ("counted instructions another way", Reason.COUNTED_OTHERWISE),
    ("host-bound", Reason.HOST_BOUND),
    ("run-time choice", Reason.OTHER_CODE),
    ("per-round data", Reason.NO_DATA),
    ("too few rounds", Reason.TOO_FEW_ROUNDS),
    ("but not significantly", Reason.NOT_SIGNIFICANT),
    ("too noisy", Reason.TOO_NOISY),
    ("baseline", Reason.UNTRUSTED_GPU),  # "baseline 0003_x.json: throttled ..."
    ("current run", Reason.UNTRUSTED_GPU),
)


def _migrated(entry: object) -> object:
    if not isinstance(entry, dict) or entry.get("verdict") != Verdict.NOT_GATED.value:
        return entry
    message = str(entry.get("message") or "")
    found = next((reason for words, reason in _FORMAT_0_REASONS if words in message), None)
    return {**entry, "reason": found.value if found else None}


def row(entry: object, index: int) -> GateRow:
    """One row of a file of rows (its ``index``-th), checked: RowsError names a bad field."""
    where = f"row {index}"
    if not isinstance(entry, dict):
        raise RowsError(f"{where} is not an object")
    known = {f.name for f in fields(GateRow)}
    values = {k: v for k, v in entry.items() if k in known}
    for key in _TEXT:
        if values.get(key) is not None and not isinstance(values[key], str):
            raise RowsError(f"{where}: {key} must be text, got {type(values[key]).__name__}")
    if not values.get("name"):
        raise RowsError(f"{where} has no name")
    for key in _NUMBERS:
        value = values.get(key)
        if value is not None and not _number(value):
            raise RowsError(f"{where} ({values['name']}): {key} must be a finite number")
    pairs = values.get("pairs")
    if pairs is not None and (not isinstance(pairs, int) or isinstance(pairs, bool) or pairs < 0):
        raise RowsError(f"{where} ({values['name']}): pairs must be a count")
    try:
        values["verdict"] = Verdict(values.get("verdict"))
        values["reason"] = Reason(values["reason"]) if values.get("reason") else None
    except ValueError as error:
        raise RowsError(f"{where} ({values['name']}): {error}") from None
    return GateRow(**values)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
