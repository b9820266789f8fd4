"""The history of a benchmark (``perfgate history``): its median in every saved run of a hardware
folder, as a table with environment changes and steps marked, and a PNG per benchmark."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate import format as fmt
from perfgate.benchmark import Run, describe_changes, environment_changes
from perfgate.format import MISSING, fmt_change, fmt_iqr, fmt_time
from perfgate.progress import Progress
from perfgate.report.common import matches
from perfgate.report.tables import render
from perfgate.verdict.steps import steps_text


@dataclass(frozen=True)
class HistoryRow:
    """One run's measurement of a benchmark (seconds), None where the run lacks it."""

    run: Run
    median: float | None
    q1: float | None
    q3: float | None
    rounds: int | None
    changes: list[tuple[str, str, str]]  # environment changes from the previous run

    @property
    def quartiles(self) -> tuple[float, float] | None:
        return None if self.q1 is None or self.q3 is None else (self.q1, self.q3)


def matching_benchmarks(runs: Sequence[Run], pattern: str) -> list[str]:
    """Fullnames matching ``pattern`` in any run, in first-seen order."""
    seen: dict[str, None] = {}
    for run in runs:
        for fullname, benchmark in run.benchmarks.items():
            if matches([benchmark.name, fullname], [pattern]):
                seen.setdefault(fullname)
    return list(seen)


def history(runs: Sequence[Run], fullname: str) -> list[HistoryRow]:
    """One row per run (in the given order, oldest first) for the benchmark ``fullname``."""
    rows, previous = [], None
    for run in runs:
        changes = [] if previous is None else environment_changes(previous, run.environment)
        previous = run.environment
        benchmark = run.benchmarks.get(fullname)
        if benchmark is None:
            rows.append(HistoryRow(run, None, None, None, None, changes))
            continue
        q1, q3 = benchmark.quartiles or (None, None)
        rounds = benchmark.rounds or None
        rows.append(HistoryRow(run, benchmark.median, q1, q3, rounds, changes))
    return rows


def _history_table(rows, markdown: bool) -> str:
    cells, previous = [], None
    for row in rows:
        change = fmt_change(previous, row.median)
        previous = row.median if row.median is not None else previous
        cells.append(
            [
                row.run.path.name,
                row.run.date,
                fmt_time(row.median) if row.median is not None else "not measured",
                fmt_iqr(row.quartiles),
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
    from perfgate.report import plots
    from perfgate.report.common import file_stem

    path = folder / f"history_{file_stem(name)}.png"
    print(f"plotting {path}", file=err, flush=True)
    return plots.history_plot(
        path,
        name,
        [f"{_short(row.run.path.stem)}\n{row.run.date[5:10]}" for row in rows],
        [row.median for row in rows],
        [row.quartiles for row in rows],
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
    blocks, views = [], list(runs)
    escape = fmt.markdown if markdown else fmt.terminal  # names and run files are stored text
    progress = Progress(len(names), "history", err, lines=False)  # a bar on a terminal only
    for number, fullname in enumerate(names):
        progress.step()
        rows = history(runs, fullname)
        title = f"## {escape(fullname)}" if markdown else escape(fullname)
        steps = "\n".join(escape(line) for line in steps_text(views, fullname).splitlines())
        blocks += [title, "", _history_table(rows, markdown), "", steps, ""]
        if plot_folder is not None and number < max_plots:
            path = _history_plot(rows, fullname, Path(plot_folder), err)
            blocks += [f"plot: {path}", ""]
    if plot_folder is not None and len(names) > max_plots:
        blocks.append(
            f"{len(names) - max_plots} more benchmarks matched and were not plotted "
            f"(--max-plots {max_plots}); narrow PATTERN or raise --max-plots"
        )
    progress.close()
    changed = "* environment changed since the previous run"
    return "\n".join([*blocks, changed, ""])
