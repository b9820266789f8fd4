"""What the gate says: a terminal table and a markdown file (for CI job summaries)."""

from __future__ import annotations

from perfgate.gate import GateResult, Verdict
from perfgate.runs import environment, environment_changes

SHOWN = (Verdict.REGRESSION, Verdict.UNCONFIRMED, Verdict.UNTRUSTED, Verdict.IMPROVEMENT)
HEADINGS = {
    Verdict.REGRESSION: "Confirmed regressions (fail the run)",
    Verdict.UNCONFIRMED: "Unconfirmed (slower once, not again on re-run)",
    Verdict.UNTRUSTED: "Not gated (host-bound case, or a throttling or shared GPU)",
    Verdict.IMPROVEMENT: "Improvements",
    Verdict.MISSING: "On one side only",
}


def environment_difference(baseline_info: dict, current_info: dict) -> list[tuple[str, str, str]]:
    """(what, baseline, current) for each software version or GPU driver that differs."""
    return environment_changes(environment(baseline_info), environment(current_info))


def _milliseconds(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def _row(result: GateResult) -> list[str]:
    c = result.comparison
    if c is None:
        return [result.name, "", "", "", "", result.message]
    return [
        result.name,
        _milliseconds(c.baseline_median),
        _milliseconds(c.current_median),
        f"{c.change_percent:+.1f}%",
        f"{c.p_value:.2g}" if c.enough_rounds else "n/a",
        result.message,
    ]


COLUMNS = ["benchmark", "baseline median", "current median", "change", "p (slower)", "detail"]


def summary_counts(results: list[GateResult]) -> str:
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    return ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)


def _not_run(result: GateResult) -> bool:
    return (
        result.verdict is Verdict.MISSING
        and result.comparison is None
        and "baseline" in (result.message)
    )


def terminal_lines(results: list[GateResult], environment: list, baseline_path: str) -> list[str]:
    """Every flagged benchmark in full; baseline benchmarks not run this time as a count."""
    lines = [f"perfgate gate against {baseline_path}: {summary_counts(results)}"]
    for what, before, now in environment:
        lines.append(f"  environment: {what} {before} -> {now}")
    for verdict in (*SHOWN, Verdict.MISSING):
        rows = [r for r in results if r.verdict is verdict and not _not_run(r)]
        if rows:
            lines.append(f"{HEADINGS[verdict]}:")
            for r in rows:
                lines.append("  " + " | ".join(_row(r)))
                lines += ["      " + detail for detail in r.details]
    not_run = sum(_not_run(r) for r in results)
    if not_run:
        lines.append(
            f"{not_run} baseline benchmarks were not run this time (deselected or skipped)"
        )
    return lines


def markdown(results: list[GateResult], environment: list, baseline_path: str) -> str:
    """A markdown summary: counts, environment difference, one table per verdict shown."""
    parts = [
        "# perfgate gate",
        "",
        f"Baseline: `{baseline_path}`. Result: {summary_counts(results)}.",
    ]
    if environment:
        parts += ["", "| environment | baseline | current |", "| --- | --- | --- |"]
        parts += [f"| {what} | {before} | {now} |" for what, before, now in environment]
    for verdict in (*SHOWN, Verdict.MISSING):
        rows = [r for r in results if r.verdict is verdict and not _not_run(r)]
        if not rows:
            continue
        parts += ["", f"## {HEADINGS[verdict]}", "", "| " + " | ".join(COLUMNS) + " |"]
        parts.append("|" + " --- |" * len(COLUMNS))
        parts += ["| " + " | ".join(_escape(cell) for cell in _row(r)) + " |" for r in rows]
    for r in (r for r in results if r.details):
        parts += ["", f"### {r.name}", "", "```", *r.details, "```"]
    not_run = [r.name for r in results if _not_run(r)]
    if not_run:
        parts += ["", f"<details><summary>{len(not_run)} baseline benchmarks not run</summary>", ""]
        parts += [f"- `{name}`" for name in not_run] + ["", "</details>"]
    return "\n".join(parts) + "\n"


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")
