"""The night as markdown (nightly.md, the job page): counts, which comparison decided, whether the
A/B stopped with cases undecided, and one row per case. The night's verdicts come from the policy
in ``verdict.nightly``; text from the runs is escaped for markdown."""

from __future__ import annotations

from perfgate import format as fmt
from perfgate.verdict.nightly import AB, STORED, Night, undecided_rows


def _cell(text: str | None) -> str:
    return fmt.markdown(text or "")


def markdown(night: Night, command: str = "nightly") -> str:
    """``command``: what the user ran (nightly or check), the page's title and resume hint."""
    rows = night.rows
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row.verdict)] = counts.get(str(row.verdict), 0) + 1
    by_ab = sum(row.decided_by == AB for row in rows)
    by_stored = sum((row.decided_by or "").startswith(STORED) for row in rows)
    shard = f" (shard {night.shard})" if night.shard else ""
    lines = [f"# perfgate {command}{_cell(shard)}", ""]
    lines.append(
        f"{len(rows)} cases: "
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + f". Decided by the stored comparison: {by_stored}; by an interleaved A/B against "
        f"{_cell(night.base_commit[:12]) or '(none needed)'} ({night.blocks} counterbalanced "
        f"block pairs, threshold {night.target:.0%}): {by_ab}."
    )
    if night.failing_tests:
        lines += [
            "",
            f"**{night.failing_tests} test(s) failed** in the stored comparison's run: "
            "see its log.",
        ]
    if night.offset:
        lines += ["", f"**This host is offset from the baseline**: {_cell(night.offset)}."]
    if undecided := undecided_rows(rows):
        effect = "fail the night" if night.undecided == "fail" else "warn (the night passes)"
        lines += [
            "",
            f"**{len(undecided)} case(s) undecided** (policy: {effect}; the data "
            "neither show a change nor rule one out):",
            "",
        ]
        lines += [
            f"- {_cell(n.name.split('::')[-1])}: A/B {_cell(n.ab or '-')}; {_cell(n.row.message)}"
            for n in undecided
        ]
    if night.stopped and night.remaining:
        lines += [
            "",
            f"**The A/B stopped ({_cell(night.stopped)})** with "
            f"{len(night.remaining)} case(s) undecided; `perfgate {command} --resume` "
            "continues it from its journal (`ab-blocks/`).",
        ]
    lines += [
        "",
        "| benchmark | verdict | decided by | stored comparison | A/B (B/A, 95% CI) | "
        "why A/B | detail |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cells = [
            row.name.split("::")[-1],
            str(row.verdict),
            row.decided_by or "-",
            row.stored,
            row.ab or "-",
            row.why_ab or "-",
            row.row.message,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)
