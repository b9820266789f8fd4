"""The night as markdown (nightly.md, the job page): counts, which comparison decided, and one
row per case. The night's verdicts come from the policy in ``verdict.nightly``."""

from __future__ import annotations

from perfgate.verdict.nightly import AB, STORED, NightRow


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def markdown(night: list[NightRow], commit: str, blocks: int, target: float, failed: int) -> str:
    counts: dict[str, int] = {}
    for row in night:
        counts[str(row.verdict)] = counts.get(str(row.verdict), 0) + 1
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
        cells = [row.name.split("::")[-1], str(row.verdict), row.decided_by or "-", row.stored,
                 row.ab or "-", row.why_ab or "-", row.row.message]  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)
