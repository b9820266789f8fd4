"""What ``perfgate compare`` and ``perfgate history`` print: run headers, the environment
difference, the tables, and the history plots."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate.changepoints import steps_text
from perfgate.runs import Run, describe_changes, environment_changes
from perfgate.tables import MISSING, fmt_percent, fmt_time, render
from perfgate.triage import VERDICTS, CompareRow, compare_runs, history, matching_benchmarks
from perfgate.triage_runs import as_run

ENVIRONMENT_KEYS = ("torch", "triton", "cuda", "cudnn", "driver", "python")


def _run_line(side: str, run: Run) -> str:
    tier = run.perfgate.get("tier")
    facts = [run.date, run.hardware_key] + ([f"tier {tier}"] if tier else [])
    line = f"{side}: {run.path} ({', '.join(facts)})"
    if run.untrusted_reasons:
        line += f"; GPU not trusted: {'; '.join(run.untrusted_reasons)}"
    return line


def environment_line(a: Run, b: Run) -> str:
    changes = environment_changes(a.environment, b.environment)
    if changes:
        return f"environment changed: {describe_changes(changes)}"
    same = [f"{k} {a.environment[k]}" for k in ENVIRONMENT_KEYS if a.environment.get(k)]
    return f"environment: same ({', '.join(same) or 'not recorded'})"


def _compare_cells(row: CompareRow) -> list[str]:
    change = row.change_percent
    c = row.comparison
    interval = f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]" if c else MISSING
    p_value = f"{row.p_value:.2g}" if row.p_value is not None else "n/a"
    return [
        row.name,
        fmt_time(row.median_a),
        fmt_time(row.median_b),
        MISSING if change is None else f"{change:+.1f} %",
        p_value,
        interval,
        row.verdict,
    ]


def compare_text(
    a: Run,
    b: Run,
    patterns: Sequence[str],
    threshold: float,
    alpha: float,
    markdown: bool,
) -> str:
    """Header lines, the environment difference, one row per benchmark, and a summary."""
    rows = compare_runs(a, b, patterns, threshold, alpha)
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no benchmark matched"
    rule = (
        f"verdicts: slower or faster by more than {fmt_percent(threshold)} with one-sided "
        f"Mann-Whitney p < {alpha:g} and the 95 % bootstrap interval of B/A excluding 1; "
        "n/a: fewer than 3 rounds on a side"
    )
    headers = ["benchmark", "A median", "B median", "change", "p", "B/A 95% CI", "verdict"]
    table = render(headers, [_compare_cells(r) for r in rows], markdown)
    lines = [_run_line("A", a), _run_line("B", b), environment_line(a, b), ""]
    if markdown:
        lines = [f"- {line}" for line in lines[:3]] + [""]
    return "\n".join([*lines, table, "", f"{summary} ({rule})", ""])


def _history_table(rows, markdown: bool) -> str:
    cells, previous = [], None
    for row in rows:
        change = MISSING
        if row.median is not None and previous is not None:
            change = f"{(row.median / previous - 1) * 100:+.1f} %"
        previous = row.median if row.median is not None else previous
        cells.append(
            [
                row.run.path.name,
                row.run.date,
                fmt_time(row.median) if row.median is not None else "not measured",
                fmt_time(row.iqr),
                MISSING if row.rounds is None else str(row.rounds),
                change,
                f"* {describe_changes(row.changes)}" if row.changes else "",
            ]
        )
    headers = ["run", "date (UTC)", "median", "IQR", "rounds", "vs previous", "environment"]
    return render(headers, cells, markdown)


def _short(stem: str) -> str:
    """'0003' for '0003_torch-2.12', else the stem's first 12 characters."""
    return stem[:4] if stem[:4].isdigit() else stem[:12]


def _history_plot(rows, name: str, folder: Path, err) -> Path:
    from perfgate import plots
    from perfgate.report_common import slug

    path = folder / f"history_{slug(name)}.png"
    print(f"plotting {path}", file=err, flush=True)
    return plots.history_plot(
        path,
        name,
        [f"{_short(row.run.path.stem)}\n{row.run.date[5:10]}" for row in rows],
        [row.median for row in rows],
        [(row.q1, row.q3) if row.q1 is not None and row.q3 is not None else None for row in rows],
        [(i, describe_changes(row.changes)) for i, row in enumerate(rows) if row.changes],
    )


def history_text(
    runs: Sequence[Run],
    pattern: str,
    plot_folder: Path | None,
    max_plots: int,
    markdown: bool,
    err=None,
) -> str:
    """One table per benchmark matching ``pattern`` over ``runs`` (oldest first), and one PNG
    per benchmark (at most ``max_plots``) into ``plot_folder`` unless it is None."""
    err = err if err is not None else sys.stderr
    names = matching_benchmarks(runs, pattern)
    if not names:
        return f"no benchmark matches '{pattern}' in {len(runs)} runs\n"
    blocks, views = [], [as_run(run) for run in runs]
    for number, fullname in enumerate(names):
        rows = history(runs, fullname)
        title = f"## {fullname}" if markdown else fullname
        blocks += [title, "", _history_table(rows, markdown), "", steps_text(views, fullname), ""]
        if plot_folder is not None and number < max_plots:
            path = _history_plot(rows, fullname.split("::")[-1], Path(plot_folder), err)
            blocks += [f"plot: {path}", ""]
    if plot_folder is not None and len(names) > max_plots:
        blocks.append(
            f"{len(names) - max_plots} more benchmarks matched and were not plotted "
            f"(--max-plots {max_plots}); narrow PATTERN or raise --max-plots"
        )
    changed = "* environment changed since the previous run"
    return "\n".join([*blocks, changed, ""])
