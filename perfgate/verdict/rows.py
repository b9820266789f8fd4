"""A verdict as ``gate.json`` stores it: ``GateRow``, typed, and the file's format, versioned.
The writer (``as_json``) and the one reader (``from_json``) stand side by side; the nightly, the
dashboard and the PR comment read rows only through ``from_json``, never by string keys.

Format 1: ``{"format": 1, "rows": [row, ...]}``. Format 0 (before the version): a bare list of
the same rows without ``reason`` and ``shift``; read through ``_migrated``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason

FORMAT = 1
KEY = "format"


class RowsError(ValueError):
    """A gate.json that is not rows this version can read; one line saying what is wrong."""


@dataclass(frozen=True)
class GateRow:
    """One case's verdict: its words (``verdict``, ``reason``, ``message``), the medians
    (seconds) and change (%) it rests on, the threshold (fraction) and where it came from, and
    the notes (``clocks``: power-limited; ``gated_on``: what decided a case other than time;
    ``shift``: the session's machine-wide shift). A counted case has its instructions per call
    instead of medians, and its change (%) is theirs."""

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
            result.name, result.verdict, result.message, result.reason, result.family,
            result.threshold, result.threshold_source, c.baseline_median if c else None,
            c.current_median if c else None, change, low, high,
            result.clocks, result.gated_on, result.shift, *counted,
        )  # fmt: skip

    def as_json(self) -> dict:
        row = asdict(self)
        row["verdict"] = self.verdict.value
        row["reason"] = self.reason.value if self.reason else None
        row["gated"] = self.gated  # for readers of the file that are not perfgate
        return row


def as_json(rows: list[GateRow]) -> dict:
    return {KEY: FORMAT, "rows": [row.as_json() for row in rows]}


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
)


def from_json(data: object) -> list[GateRow]:
    """The rows of a gate.json (format 0 or 1); RowsError naming the first bad row or field."""
    if isinstance(data, list):
        data = {KEY: 0, "rows": data}
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise RowsError("not a perfgate gate summary (an object with 'format' and 'rows')")
    version = data.get(KEY)
    if version not in (0, FORMAT):
        raise RowsError(f"format {version!r}, this perfgate reads 0 to {FORMAT}: upgrade perfgate")
    entries = data["rows"] if version == FORMAT else [_migrated(e) for e in data["rows"]]
    return [_row(entry, index) for index, entry in enumerate(entries)]


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


def _row(entry: object, index: int) -> GateRow:
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
    try:
        values["verdict"] = Verdict(values.get("verdict"))
        values["reason"] = Reason(values["reason"]) if values.get("reason") else None
    except ValueError as error:
        raise RowsError(f"{where} ({values['name']}): {error}") from None
    return GateRow(**values)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
