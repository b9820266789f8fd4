"""The nightly's policy, as pure functions: which cases of the stored comparison go to the
interleaved A/B (``ab_reason``), and how the two results become the night's verdict per case
(``night``). ``perfgate nightly`` runs the comparisons; this module only decides.

A host-bound case is gated on its exact launch counts by the stored comparison (the A/B cannot
see 3 % in a time that follows host jitter); a count that grew fails the night without an A/B.
Every other case goes to the A/B when the stored comparison flagged it (regression or
unconfirmed), could not gate it (a run-time choice, too few rounds, too noisy), saw it
power-limited (its stored comparison drifts with the clock between sessions), saw it slower than
the screen, or gated it at a threshold looser than the target (other than a test's own marker).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason
from perfgate.verdict.rows import FORMAT, GateRow, RowsError
from perfgate.verdict.rows import from_json as read_rows

STORED = "stored comparison"
AB = "A/B"
AB_DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED)  # decide a case
# a night's rows, worst first: the gate's order, an unconfirmed case being not gated here
ORDER = [v for v in Verdict if v is not Verdict.UNCONFIRMED]


def ab_reason(row: GateRow, screen: float, target: float) -> str | None:
    """Why a row of the stored comparison goes to the A/B, or None when that comparison
    decides the case."""
    if row.verdict in (Verdict.NEW, Verdict.NOT_RUN) or row.gated_on:  # exact: no A/B
        return None
    if row.verdict.slower:
        return f"{STORED}: {row.verdict}"
    if not row.gated:
        return f"{STORED} {row.message}"
    if row.clocks:
        return row.clocks
    if row.change_percent is not None and row.change_percent > 100 * screen:
        return f"{STORED} {row.change_percent:+.1f}% (screen {screen:.0%})"
    threshold = row.threshold
    if threshold is not None and threshold > target and row.threshold_source != "marker":
        return f"stored threshold {threshold:.1%} is looser than {target:.0%}"
    return None


@dataclass(frozen=True)
class NightRow:
    """The night's verdict on one case: ``row`` (the gate's row format, with the night's
    verdict, message and change), which comparison decided it, the stored comparison's verdict
    and the A/B's (None when the case did not go to the A/B), and why it went there."""

    row: GateRow
    decided_by: str | None  # STORED, AB, or None (not gated, new, not run)
    stored: str  # the stored comparison's verdict and change
    ab: str | None
    why_ab: str | None

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def verdict(self) -> Verdict:
        return self.row.verdict


def _stored(row: GateRow) -> str:
    change = row.change_percent
    return str(row.verdict) + (f" {change:+.1f}%" if change is not None else "")


def _ab(result: GateResult) -> str:
    c = result.comparison
    if c is None or not c.enough_rounds:
        return str(result.verdict)
    return f"{result.verdict} {c.change_percent:+.1f}% [{c.ratio_low:.3f}, {c.ratio_high:.3f}]"


def night(row: GateRow, why: str | None, result: GateResult | None) -> NightRow:
    """One case's night: the A/B's verdict where the case went to it (``why``), else the stored
    comparison's. A case the A/B could not decide is not gated, with the A/B's reason."""
    stored = _stored(row)
    if why is None:
        by = (f"{STORED}, {row.gated_on}" if row.gated_on else STORED) if row.gated else None
        return NightRow(row, by, stored, None, None)
    if result is None:
        message = "not gated: the A/B did not run it in both trees"
        kept = replace(row, verdict=Verdict.NOT_GATED, message=message, reason=Reason.NO_DATA)
        return NightRow(kept, None, stored, None, why)
    if result.verdict in AB_DECIDED:
        change = result.comparison.change_percent if result.comparison else None
        decided = replace(row, verdict=result.verdict, message=result.message, reason=None,
                          change_percent=change)  # fmt: skip
        return NightRow(decided, AB, stored, _ab(result), why)
    message = f"not gated: A/B {result.message.removeprefix('not gated: ')}"
    reason = result.reason or Reason.NOT_SIGNIFICANT
    kept = replace(row, verdict=Verdict.NOT_GATED, message=message, reason=reason)
    return NightRow(kept, None, stored, _ab(result), why)


def decide(rows: list[GateRow], reasons: dict[str, str], results: dict) -> list[NightRow]:
    """The night, worst first: one NightRow per row of the stored comparison."""
    nights = [night(row, reasons.get(row.name), results.get(row.name)) for row in rows]
    return sorted(nights, key=lambda n: (ORDER.index(n.verdict), n.name))


def failed(nights: list[NightRow]) -> bool:
    return any(n.verdict is Verdict.REGRESSION for n in nights)


def gated_nothing(nights: list[NightRow]) -> bool:
    """A night that judged no case (none gated by either comparison) must not pass."""
    return not any(n.verdict.gated for n in nights)


@dataclass(frozen=True)
class Night:
    """A night: its rows and what it ran with (A's commit, block pairs a tree, the target and
    screen as fractions, failing tests), whether its A/B stopped (``stopped``: interrupted, time
    limit) leaving ``remaining`` cases undecided, and the shard (``I/N``) it was, if one."""

    rows: list[NightRow]
    base_commit: str = ""
    blocks: int = 0
    target: float = 0.0
    screen: float = 0.0
    failing_tests: int = 0
    stopped: str | None = None
    remaining: tuple[str, ...] = ()
    shard: str | None = None


FACTS = {"base_commit": str, "blocks": int, "target": float, "screen": float,
         "failing_tests": int, "stopped": str, "shard": str}  # fmt: skip


def as_json(night: Night) -> dict:
    """nightly-verdicts.json: the night's facts and, per case, the gate's row with which
    comparison decided, both results and why the case went to the A/B."""
    cases = [{**n.row.as_json(), "decided_by": n.decided_by, "stored": n.stored, "ab": n.ab,
              "why_ab": n.why_ab} for n in night.rows]  # fmt: skip
    facts = {key: getattr(night, key) for key in FACTS}
    return {**facts, "remaining": list(night.remaining), "cases": cases}


def from_json(data: object) -> Night:
    """A night written by ``as_json``; RowsError naming what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise RowsError("not a perfgate nightly-verdicts.json (an object with 'cases')")
    rows = read_rows({"format": FORMAT, "rows": data["cases"]})
    nights = []
    for row, case in zip(rows, data["cases"], strict=True):
        texts = [case.get(key) for key in ("decided_by", "stored", "ab", "why_ab")]
        if any(text is not None and not isinstance(text, str) for text in texts):
            raise RowsError(f"{row.name}: decided_by, stored, ab and why_ab must be text")
        nights.append(NightRow(row, texts[0], texts[1] or "", texts[2], texts[3]))
    facts = {key: data[key] for key in FACTS if data.get(key) is not None}
    for key, value in facts.items():
        kind = (int, float) if FACTS[key] is float else FACTS[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise RowsError(f"{key} must be {FACTS[key].__name__}, got {value!r}")
    remaining = data.get("remaining") or []
    if not isinstance(remaining, list) or not all(isinstance(n, str) for n in remaining):
        raise RowsError("remaining must be a list of case names")
    return Night(nights, **facts, remaining=tuple(remaining))
