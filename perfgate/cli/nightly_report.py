"""The nightly's verdict per case, and which comparison decided it: the stored comparison where it
settles the case, else the interleaved A/B (``perfgate nightly``)."""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.verdict.outcome import Verdict

STORED = "stored comparison"
AB = "A/B"
AB_DECIDED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED)  # decide a case
NOT_GATED = str(Verdict.NOT_GATED)
# a night's rows, worst first: the gate's order, an unconfirmed case being not gated here
ORDER = [str(v) for v in Verdict if v is not Verdict.UNCONFIRMED]


@dataclass(frozen=True)
class NightRow:
    name: str
    verdict: str  # a Verdict's word: regression, improvement, unchanged, not gated, new, not run
    decided_by: str | None  # STORED, AB, or None (not gated, new, not run)
    stored: str  # the stored comparison's verdict and change
    ab: str | None  # the A/B's verdict, ratio and interval; None when it did not run the case
    why_ab: str | None  # why the case went to the A/B
    message: str
    change_percent: float | None = None  # from the comparison that decided (the stored one else)


def _stored(row: dict) -> str:
    change = row.get("change_percent")
    return row["verdict"] + (f" {change:+.1f}%" if change is not None else "")


def _stored_by(row: dict) -> str:
    """STORED, naming what it gated on when that was not time (a host-bound case's counts)."""
    return f"{STORED}, {row['gated_on']}" if row.get("gated_on") else STORED


def _ab(result) -> str:
    c = result.comparison
    if c is None or not c.enough_rounds:
        return str(result.verdict)
    return f"{result.verdict} {c.change_percent:+.1f}% [{c.ratio_low:.3f}, {c.ratio_high:.3f}]"


def decide(rows: list[dict], reasons: dict[str, str], verdicts: dict) -> list[NightRow]:
    """One NightRow per gate row: the A/B's verdict where the case went to it, else the stored
    comparison's. A case the A/B could not compare is not gated, with the A/B's reason."""
    night = []
    for row in rows:
        name, stored, change = row["name"], _stored(row), row.get("change_percent")
        why = reasons.get(name)
        result = verdicts.get(name)
        if why is None:
            decided = _stored_by(row) if row["gated"] else None
            fields = (row["verdict"], decided, stored, None, None, row["message"], change)
        elif result is None:
            message = "not gated: the A/B did not run it in both trees"
            fields = (NOT_GATED, None, stored, None, why, message, change)
        elif result.verdict in AB_DECIDED:
            change = result.comparison.change_percent
            fields = (str(result.verdict), AB, stored, _ab(result), why, result.message,
                      change)  # fmt: skip
        else:
            message = f"not gated: A/B {result.message}"
            fields = (NOT_GATED, None, stored, _ab(result), why, message, change)
        night.append(NightRow(name, *fields))
    return sorted(night, key=lambda r: (ORDER.index(r.verdict) if r.verdict in ORDER else 9,
                                        r.name))  # fmt: skip


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def markdown(night: list[NightRow], commit: str, blocks: int, target: float, failed: int) -> str:
    counts: dict[str, int] = {}
    for row in night:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    by_ab = sum(row.decided_by == AB for row in night)
    by_stored = sum((row.decided_by or "").startswith(STORED) for row in night)
    lines = ["# perfgate nightly", ""]
    lines.append(
        f"{len(night)} cases: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + f". Decided by the stored comparison: {by_stored}; by an interleaved A/B against "
        f"{commit[:12] or '(none needed)'} ({blocks} blocks per tree, threshold {target:.0%}): "
        f"{by_ab}."
    )  # fmt: skip
    if failed:
        lines += ["", f"**{failed} test(s) failed** in the stored comparison's run: see its log."]
    lines += ["", "| benchmark | verdict | decided by | stored comparison | A/B (B/A, 95% CI) | "
              "why A/B | detail |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for row in night:
        cells = [row.name.split("::")[-1], row.verdict, row.decided_by or "-", row.stored,
                 row.ab or "-", row.why_ab or "-", row.message]  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)
