"""What ``perfgate ab`` prints: one row per case (the paired numbers it was judged on) and one line
per case that is not unchanged, in the gate's words."""

from __future__ import annotations

from perfgate.format import MISSING, fmt_time
from perfgate.progress import printable
from perfgate.report.tables import render
from perfgate.verdict.outcome import GateResult, Verdict

HEADERS = [
    "benchmark",
    "A blocks",
    "B blocks",
    "B/A (paired)",
    "95% CI",
    "p",
    "threshold",
    "verdict",
]


def table(results: list[GateResult]) -> str:
    """The A and B columns are the block medians' geometric means, weighted as the paired
    ratio is, so B/A is their ratio."""
    rows = []
    for r in results:
        c = r.comparison
        rows.append(
            [
                printable(r.name.split("::")[-1]),
                fmt_time(c.baseline_median) if c else MISSING,
                fmt_time(c.current_median) if c else MISSING,
                f"{c.ratio:.4f}" if c else MISSING,
                f"[{c.ratio_low:.4f}, {c.ratio_high:.4f}]" if c and c.enough_rounds else MISSING,
                f"{c.p_value:.2g}" if c and c.enough_rounds else MISSING,
                f"{r.threshold:.1%}" if r.threshold is not None else MISSING,
                r.verdict.value,
            ]
        )
    return render(HEADERS, rows, False)


def verdict_lines(results: list[GateResult]) -> list[str]:
    """``name: verdict: why`` for every case that is not unchanged (the verdict said once)."""
    lines = []
    for r in results:
        if r.verdict is not Verdict.UNCHANGED:
            why = r.message.removeprefix(f"{r.verdict.value}: ")
            lines.append(f"  {printable(r.name.split('::')[-1])}: {r.verdict}: {printable(why)}")
    return lines
