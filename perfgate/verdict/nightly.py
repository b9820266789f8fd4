"""The nightly's policy, as pure functions: which cases of the stored comparison go to the
interleaved A/B (``ab_reason``), and how the two results become the night's verdict per case
(``night``). ``perfgate nightly`` runs the comparisons; this module only decides.

A host-bound case is gated on its exact launch counts by the stored comparison (the A/B cannot
see 3 % in a time that follows host jitter); a count that grew fails the night without an A/B.
Every other case goes to the A/B when the stored comparison flagged it (regression or
unconfirmed), could not decide or gate it (undecided, a run-time choice, too noisy), saw it
power-limited (its stored comparison drifts with the clock between sessions), saw it moved past
the screen in either direction (a baseline that ran faster on this host hides a slowdown of the
same size), or gated it at a threshold looser than the target (other than a test's own marker)
unless its interval already rules out half the target.

The A/B decides a case it can decide. Where it cannot (undecided after its extra pairs, or not
gated), a stored regression stands and fails the night: only a comparison that rules the
slowdown out clears it. Every other undecided case follows the night's policy: ``warn`` (listed
first, the night passes) or ``fail``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason
from perfgate.verdict.rows import KEY, GateRow, Kind, RowsError, rows_of, written

STORED = "stored comparison"
AB = "A/B"
AB_DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED)  # decide a case
UNDECIDED_POLICIES = ("warn", "fail")  # what an undecided case does to the night
# A host whose cases ran this much faster or slower than the baseline's, at the median of its
# timed cases, is said to be offset (at least OFFSET_CASES cases): a baseline of another host,
# or one that drifted.
OFFSET_CASES = 5
# A case gated at a threshold looser than the target is decided by the stored comparison
# when its ratio's interval lies below 1 + this share of the target: the interval is of one
# session's rounds, and sessions of device-timed kernels differ by about 1 % (noise.DEVICE_FLOOR's
# note), so half of the 3 % target is left for that. On the two H200s (session 9) this settled 6
# of the 8 cases sent for a loose threshold, of 45 sent to the A/B.
DECIDED_SHARE = 0.5
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
    if row.change_percent is not None and abs(row.change_percent) > 100 * screen:
        return f"{STORED} {row.change_percent:+.1f}% (screen {screen:.0%} either way)"
    threshold = row.threshold
    if threshold is not None and threshold > target and row.threshold_source != "marker":
        if row.ratio_high is not None and row.ratio_high < 1 + target * DECIDED_SHARE:
            return None  # its interval rules out even half the target: decided at the target
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
    """One case's night: the A/B's verdict where the case went to it (``why``) and the A/B
    decided it, else the stored comparison's. Where the A/B could not decide a case, a stored
    regression stands (the night fails on it); any other case keeps the A/B's undecided or not
    gated, with its words."""
    stored = _stored(row)
    if why is None:
        by = (f"{STORED}, {row.gated_on}" if row.gated_on else STORED) if row.gated else None
        return NightRow(row, by, stored, None, None)
    if result is not None and result.verdict in AB_DECIDED:
        change = result.comparison.change_percent if result.comparison else None
        decided = replace(
            row, verdict=result.verdict, message=result.message, reason=None, change_percent=change
        )
        return NightRow(decided, AB, stored, _ab(result), why)
    ab = _ab(result) if result is not None else None
    said = "did not run it in both trees" if result is None else _without_verdict(result.message)
    if row.verdict is Verdict.REGRESSION:
        message = (
            f"stored regression {stored.removeprefix('regression ')} that the A/B could "
            f"not clear (A/B {said}): {row.message}"
        )
        return NightRow(replace(row, message=message), STORED, stored, ab, why)
    if result is None:
        message = f"not gated: the A/B {said}"
        kept = replace(row, verdict=Verdict.NOT_GATED, message=message, reason=Reason.NO_DATA)
        return NightRow(kept, None, stored, None, why)
    verdict = result.verdict if result.verdict is Verdict.NOT_GATED else Verdict.UNDECIDED
    reason = result.reason or Reason.NOT_SIGNIFICANT
    kept = replace(row, verdict=verdict, message=f"{verdict}: A/B {said}", reason=reason)
    return NightRow(kept, None, stored, ab, why)


def _without_verdict(message: str) -> str:
    for word in ("undecided: ", "not gated: "):
        message = message.removeprefix(word)
    return message


def host_offset(rows: list[GateRow]) -> tuple[float, int] | None:
    """How the stored comparison's timed cases moved at the median (a fraction) and how many
    there were: a host that runs them all faster or slower than the baseline says so. None
    with fewer than OFFSET_CASES."""
    changes = sorted(
        r.change_percent / 100
        for r in rows
        if r.verdict.decided
        and r.gated_on is None
        and r.baseline_instructions is None
        and r.change_percent is not None
    )
    if len(changes) < OFFSET_CASES:
        return None
    middle = len(changes) // 2
    median = changes[middle] if len(changes) % 2 else (changes[middle - 1] + changes[middle]) / 2
    return median, len(changes)


def offset_note(offset: tuple[float, int] | None, screen: float) -> str | None:
    """One sentence where this host's cases ran systematically faster or slower than the
    baseline's (past the screen at the median), else None."""
    if offset is None or abs(offset[0]) <= screen:
        return None
    median, cases = offset
    way = "faster" if median < 0 else "slower"
    return (
        f"this host ran the stored comparison's {cases} timed cases {way} than the baseline by "
        f"{abs(median):.1%} at the median: the baseline is another host's or has drifted, and a "
        f"slowdown of that size could hide in it, so every case moved past the {screen:.0%} "
        "screen in either direction went to the A/B"
    )


def decide(rows: list[GateRow], reasons: dict[str, str], results: dict) -> list[NightRow]:
    """The night, worst first: one NightRow per row of the stored comparison."""
    nights = [night(row, reasons.get(row.name), results.get(row.name)) for row in rows]
    return sorted(nights, key=lambda n: (ORDER.index(n.verdict), n.name))


def failed(nights: list[NightRow], undecided: str = "warn") -> bool:
    """A regression fails the night; so does an undecided case where the policy is ``fail``."""
    if any(n.verdict is Verdict.REGRESSION for n in nights):
        return True
    return undecided == "fail" and any(n.verdict is Verdict.UNDECIDED for n in nights)


def undecided_rows(nights: list[NightRow]) -> list[NightRow]:
    return [n for n in nights if n.verdict is Verdict.UNDECIDED]


def gated_nothing(nights: list[NightRow]) -> bool:
    """A night that judged no case (none gated by either comparison) must not pass."""
    return not any(n.verdict.gated for n in nights)


@dataclass(frozen=True)
class Night:
    """A night: its rows and what it ran with (A's commit, block pairs a tree, the target and
    screen as fractions, failing tests), whether its A/B stopped (``stopped``: interrupted, time
    limit) leaving ``remaining`` cases undecided, the shard (``I/N``) it was, if one, its policy
    for undecided cases, and the note on this host's offset from the baseline, if any."""

    rows: list[NightRow]
    base_commit: str = ""
    blocks: int = 0
    target: float = 0.0
    screen: float = 0.0
    failing_tests: int = 0
    stopped: str | None = None
    remaining: tuple[str, ...] = ()
    shard: str | None = None
    undecided: str = "warn"  # the policy for undecided cases (UNDECIDED_POLICIES)
    offset: str | None = None  # where this host's cases ran systematically faster or slower


FACTS = {
    "base_commit": str,
    "blocks": int,
    "target": float,
    "screen": float,
    "failing_tests": int,
    "stopped": str,
    "shard": str,
    "undecided": str,
    "offset": str,
}


# nightly-verdicts.json: format 1 is the rows' shared shape (``rows.written``); format 0, before
# the version, held the same cases under "cases", read as they are
NIGHT = Kind("nightly verdicts", 1, oldest=0)


def as_json(night: Night) -> dict:
    """nightly-verdicts.json: the night's facts and, per case, the gate's row with which
    comparison decided, both results and why the case went to the A/B."""
    cases = [
        {
            **n.row.as_json(),
            "decided_by": n.decided_by,
            "stored": n.stored,
            "ab": n.ab,
            "why_ab": n.why_ab,
        }
        for n in night.rows
    ]
    facts = {key: getattr(night, key) for key in FACTS}
    return written(NIGHT, cases, **facts, remaining=list(night.remaining))


def from_json(data: object) -> Night:
    """A night written by ``as_json`` (or before the format's version); RowsError naming what
    is wrong, in one line."""
    if isinstance(data, dict) and KEY not in data and isinstance(data.get("cases"), list):
        data = {**data, KEY: 0, "rows": data["cases"]}  # format 0
    head, found = rows_of(NIGHT, data)
    nights = []
    for row, case in zip(found, data["rows"], strict=True):
        texts = [case.get(key) for key in ("decided_by", "stored", "ab", "why_ab")]
        if any(text is not None and not isinstance(text, str) for text in texts):
            raise RowsError(f"{row.name}: decided_by, stored, ab and why_ab must be text")
        nights.append(NightRow(row, texts[0], texts[1] or "", texts[2], texts[3]))
    facts = {key: head[key] for key in FACTS if head.get(key) is not None}
    for key, value in facts.items():
        kind = (int, float) if FACTS[key] is float else FACTS[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise RowsError(f"{key} must be {FACTS[key].__name__}, got {value!r}")
    remaining = head.get("remaining") or []
    if not isinstance(remaining, list) or not all(isinstance(n, str) for n in remaining):
        raise RowsError("remaining must be a list of case names")
    return Night(nights, **facts, remaining=tuple(remaining))
