"""What a verdict looks like: terminal lines, a markdown summary (CI job pages) and JSON.

The gate and ``perfgate compare`` print these same rows; every word comes from the verdict.
"""

from __future__ import annotations

from perfgate import format as fmt
from perfgate.benchmark import Run, environment_changes
from perfgate.verdict import rows
from perfgate.verdict.judge import GateResult, Verdict
from perfgate.verdict.reason import Reason

HEADINGS = {
    Verdict.REGRESSION: "Confirmed regressions (fail the run)",
    Verdict.UNCONFIRMED: "Unconfirmed (slower in one pass only; the gate re-runs these)",
    Verdict.UNDECIDED: "Undecided (the data neither show a change nor rule one out)",
    Verdict.NOT_GATED: "Not gated, with the reason",
    Verdict.NEW: "New benchmarks (not in the baseline)",
    Verdict.IMPROVEMENT: "Improvements",
    Verdict.UNCHANGED: "Unchanged",
    Verdict.NOT_RUN: "In the baseline, not run this time",
}
LISTED = (Verdict.REGRESSION, Verdict.UNCONFIRMED, Verdict.UNDECIDED, Verdict.NOT_GATED)
LISTED += (Verdict.NEW,)
LISTED += (Verdict.IMPROVEMENT,)
COLUMNS = ["benchmark", "baseline median", "current median", "change", "p (slower)", "detail"]
COLUMNS += ["threshold"]
# GitHub shows at most 1 MiB of a job's step summary (gate.md): cut before that, and say where
# every verdict is
MARKDOWN_BYTES = 1_000_000


def environment_difference(baseline: Run, current: Run) -> list[tuple[str, str, str]]:
    """(what, baseline, current) for each software version or GPU driver that differs."""
    return environment_changes(baseline.environment, current.environment)


def counts(results: list[GateResult]) -> str:
    """'12 gated (1 regression, 11 unchanged); 2 undecided (2 interval wider than the
    threshold); 1 not gated (1 too noisy); 1 new; 3 not run': every reason counted."""
    gated = [r for r in results if r.verdict.gated]
    by_verdict = {v: sum(r.verdict is v for r in results) for v in Verdict}
    inside = ", ".join(f"{by_verdict[v]} {v}" for v in Verdict if v.gated and by_verdict[v])
    parts = [f"{len(gated)} gated" + (f" ({inside})" if inside else "")]
    for verdict in (Verdict.UNDECIDED, Verdict.NOT_GATED, Verdict.NEW, Verdict.NOT_RUN):
        if by_verdict[verdict]:
            parts.append(f"{by_verdict[verdict]} {verdict}{_reasons(results, verdict)}")
    return "; ".join(parts)


def _reasons(results: list[GateResult], verdict: Verdict) -> str:
    """' (2 too noisy, 1 host-bound)': how many of ``verdict`` each reason explains."""
    reasons = [r.reason for r in results if r.verdict is verdict and r.reason is not None]
    found = {reason: reasons.count(reason) for reason in dict.fromkeys(reasons)}
    listed = ", ".join(f"{n} {reason}" for reason, n in sorted(found.items(), key=_most))
    return f" ({listed})" if listed else ""


def _most(item: tuple[Reason, int]) -> tuple[int, str]:
    return -item[1], item[0].value


def machine_shift(results: list[GateResult]) -> str | None:
    """How the session moved as a whole, where that decided a case (``verdict.shift``)."""
    return next((r.shift for r in results if r.shift), None)


def threshold_cell(result: GateResult) -> str:
    """'3.0 % (floor 3 % (measured noise 0.4 % (5 blocks)))'; '' without a threshold."""
    if result.threshold is None:
        return ""
    return f"{result.threshold:.1%} ({result.threshold_source})"


def cells(result: GateResult) -> list[str]:
    c = result.comparison
    if result.instructions:  # a counted case: its instructions per call, exact (no p-value)
        before, now = result.instructions
        counted = [
            fmt.fmt_instructions(before),
            fmt.fmt_instructions(now),
            fmt.fmt_change(before, now),
            "exact",
        ]
        return [result.name, *counted, result.message, threshold_cell(result)]
    if c is None:
        return [result.name, "", "", "", "", result.message, threshold_cell(result)]
    return [
        result.name,
        fmt.fmt_time(c.baseline_median),
        fmt.fmt_time(c.current_median),
        fmt.fmt_percent(c.change_percent / 100, signed=True),
        f"{c.p_value:.2g}" if c.enough_rounds else "n/a",
        result.message,
        threshold_cell(result),
    ]


def terminal_lines(results: list[GateResult], changes: list, baseline: str) -> list[str]:
    """The counts, the environment difference, then every result not unchanged, by verdict;
    stored text (names, versions, messages) escaped for a terminal."""
    lines = [f"perfgate gate against {baseline}: {counts(results)}"]
    if shift := machine_shift(results):
        lines.append(f"  session: {shift}")
    lines += [f"  environment: {what} {before} -> {now}" for what, before, now in changes]
    for verdict in LISTED:
        rows = [r for r in results if r.verdict is verdict]
        if rows:
            lines.append(f"{HEADINGS[verdict]}:")
            for r in rows:
                lines.append("  " + " | ".join(cells(r)))
                lines += ["      " + detail for detail in r.details]
    not_run = sum(r.verdict is Verdict.NOT_RUN for r in results)
    if not_run:
        lines.append(
            f"{not_run} baseline benchmarks were not run this time (deselected or skipped)"
        )
    return [fmt.terminal(line) for line in lines]


def markdown(
    results: list[GateResult],
    changes: list,
    baseline: str,
    rest: str = "the JSON summary beside this file",
) -> str:
    """A markdown summary: counts, environment difference, one table per verdict listed. Stored
    text is escaped (``format.markdown``); past MARKDOWN_BYTES it is cut at a line, with a line
    saying that every verdict is in ``rest``."""
    md = fmt.markdown
    parts = ["# perfgate gate", "", f"Baseline: {md(baseline)}. Result: {counts(results)}."]
    if shift := machine_shift(results):
        parts += ["", f"Session: {md(shift)}."]
    if changes:
        parts += ["", "| environment | baseline | current |", "| --- | --- | --- |"]
        parts += [f"| {md(what)} | {md(before)} | {md(now)} |" for what, before, now in changes]
    for verdict in (*LISTED, Verdict.UNCHANGED):
        rows = [r for r in results if r.verdict is verdict]
        if not rows:
            continue
        table = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
        table += ["| " + " | ".join(md(cell) for cell in cells(r)) + " |" for r in rows]
        if verdict is Verdict.UNCHANGED:
            summary = f"<details><summary>{len(rows)} unchanged</summary>"
            parts += ["", summary, "", *table, "", "</details>"]
        else:
            parts += ["", f"## {HEADINGS[verdict]}", "", *table]
    for r in (r for r in results if r.details):
        parts += ["", f"### {md(r.name)}", "", *fmt.markdown_block(r.details)]
    not_run = [r.name for r in results if r.verdict is Verdict.NOT_RUN]
    if not_run:
        parts += ["", f"<details><summary>{len(not_run)} baseline benchmarks not run</summary>", ""]
        parts += [f"- {md(name)}" for name in not_run] + ["", "</details>"]
    return _cut(parts, rest)


def _cut(lines: list[str], rest: str) -> str:
    """The lines, cut at the last whole line that fits MARKDOWN_BYTES with the closing lines
    (an open code block and open ``<details>`` closed, and where the rest is)."""
    text = "\n".join(lines) + "\n"
    if len(text.encode("utf-8")) <= MARKDOWN_BYTES:
        return text
    kept, size, fence, opened = [], 0, None, 0
    for line in lines:
        size += len(line.encode("utf-8")) + 1
        if size > MARKDOWN_BYTES - 1000:  # room for the closing lines
            break
        kept.append(line)
        if line.startswith("```"):
            fence = None if fence == line else fence or line
        elif fence is None:
            opened += line.count("<details>") - line.count("</details>")
    closing = [fence] if fence else []
    closing += ["", "</details>"] * opened
    closing += [
        "",
        f"**Cut here**: this summary is {len(text.encode()):,} bytes, past the "
        f"{MARKDOWN_BYTES:,} a job page shows; every verdict is in {fmt.markdown(rest)}.",
    ]
    return "\n".join(kept + closing) + "\n"


def as_json(results: list[GateResult]) -> dict:
    """gate.json: one typed row per benchmark, versioned (``verdict.rows``)."""
    return rows.as_json([rows.GateRow.of(r) for r in results])
