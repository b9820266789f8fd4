"""The dashboard site: a static HTML history of every benchmark, viewable from disk, and the
markdown a CI job summary shows of it.

The site is ``index.html`` (every benchmark, grouped by hardware and family, with its latest
change and its newest step), one page per benchmark under ``<hardware key>/`` (``dashboard_page``),
and one shared ``plotly.min.js``. The runs come grouped by hardware (``perfgate dashboard`` reads
them through the store); steps revealed by the runs given on the command line are returned for
the job summary.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from perfgate import format as fmt
from perfgate.format import MISSING, fmt_change, fmt_percent, fmt_time, html, slug
from perfgate.outputs import disk_problem
from perfgate.progress import Progress
from perfgate.report.common import file_stem
from perfgate.report.dashboard_page import (
    benchmark_page,
    declared_ratios,
    page,
    step_cell,
    table,
)
from perfgate.store import owners
from perfgate.store import schema as run_schema
from perfgate.verdict import steps as changepoints
from perfgate.verdict.rows import GateRow

MARKER = ".perfgate-dashboard"  # written into the folder: it may be rebuilt in place


class DashboardError(Exception):
    """The dashboard cannot be built; the message says what to do."""


UNDECLARED = "no family declared"  # the index's group of cases whose tests declare none


def family(runs: Sequence, fullname: str) -> str:
    """The family the test declared (``@pytest.mark.perfgate(family=...)``), from the newest run
    that saved a declaration for the case; ``UNDECLARED`` where none did."""
    for run in reversed(runs):
        benchmark = run.benchmarks.get(fullname)
        if benchmark is not None and benchmark.family:
            return benchmark.family
    return UNDECLARED


def page_path(hardware: str, fullname: str) -> str:
    """The page of a benchmark, relative to the site's root."""
    return f"{slug(hardware)}/{file_stem(fullname)}.html"


def _prepare(out: Path) -> Path:
    """A new staging folder beside ``out``, where the site is built before it replaces ``out``
    (an interrupted build leaves no half-built site)."""
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise DashboardError(
            f"{out} holds files that are not a perfgate dashboard; pass --out with a new or "
            "empty folder (nothing there is overwritten)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        staging.chmod(0o777 & ~owners.umask())  # mkdtemp makes it 0700; the site is the user's
        (staging / MARKER).write_text("built by perfgate dashboard; safe to delete and rebuild\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _replace(out: Path, staging: Path) -> None:
    """Put the built site in place of ``out`` (two renames: never a site without index.html)."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out)


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as error:
        raise DashboardError(
            "the dashboard needs plotly, which is not installed: pip install 'perfgate[dashboard]'"
        ) from error
    return get_plotlyjs()


def _index_row(hardware: str, runs: Sequence, fullname: str, steps) -> list[str]:
    measured = changepoints.measured(runs, fullname)
    newest = measured[-1].benchmarks[fullname]
    change = MISSING
    if len(measured) > 1:
        change = fmt_change(measured[-2].benchmarks[fullname].median, newest.median)
    link = f"<a href='{page_path(hardware, fullname)}'>{html(newest.name)}</a>"
    return [
        link,
        html(newest.group_label),
        str(len(measured)),
        fmt_time(newest.median),
        change,
        step_cell(steps[-1] if steps else None),
    ]


def _index(sections: list[tuple[str, str, list[list[str]]]], open_steps: list[str]) -> str:
    headers = ["benchmark", "group", "runs", "newest median", "vs previous run", "newest step"]
    body = ["<h1>perfgate: benchmark history</h1>"]
    if open_steps:
        body += ["<h2>Open slowdowns (newest step of a series is slower)</h2>"]
        body += ["<ul>" + "".join(f"<li>{s}</li>" for s in open_steps) + "</ul>"]
    hardware_seen = None
    for hardware, family, rows in sections:
        if hardware != hardware_seen:
            body.append(f"<h2>{html(hardware)}</h2>")
            hardware_seen = hardware
        body += [f"<h3>{html(family)}</h3>", table(headers, rows)]
    return page("perfgate dashboard", "\n".join(body))


def _write_pages(out: Path, hardware: str, runs: Sequence, open_steps: list[str], err) -> dict:
    """One page per benchmark of a hardware; returns the index rows by family and adds
    each series whose newest step is a slowdown to ``open_steps``."""
    families: dict[str, list[list[str]]] = {}
    ratios = declared_ratios(runs)
    names = benchmark_names(runs)
    progress = Progress(len(names), f"{hardware}: pages", err, lines=False)  # terminal only
    for fullname in names:
        progress.step()
        steps = changepoints.steps(runs, fullname)
        target = out / page_path(hardware, fullname)
        target.parent.mkdir(parents=True, exist_ok=True)
        measured = changepoints.measured(runs, fullname)
        target.write_text(benchmark_page(measured, fullname, hardware, steps, ratios), "utf-8")
        row = _index_row(hardware, runs, fullname, steps)
        families.setdefault(family(runs, fullname), []).append(row)
        if steps and steps[-1].after > steps[-1].before:
            link = f"<a href='{page_path(hardware, fullname)}'>{html(fullname)}</a>"
            open_steps.append(f"{link}: {step_cell(steps[-1])}")
    progress.close()
    return families


def build(grouped: dict, extra: Sequence[Path], out: Path, err=None) -> tuple[Path, list]:
    """Write the site of the runs ``grouped`` by hardware into ``out``; returns (index path,
    steps the ``extra`` run files revealed)."""
    try:  # a disk that fills up is one line; ``out`` stays as it was, no staging folder stays
        staging = _prepare(out)
        try:
            revealed = _write_site(staging, grouped, extra, err)
            _replace(out, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:
        raise DashboardError(
            f"{disk_problem(error, 'the dashboard')}; {out} is as it was"
        ) from None
    return out / "index.html", revealed


def _write_site(out: Path, grouped: dict, extra: Sequence[Path], err) -> list:
    """Every page, the index and plotly into ``out``; returns the steps ``extra`` revealed."""
    (out / "plotly.min.js").write_text(_plotly_js(), encoding="utf-8")
    given = {os.path.realpath(p) for p in extra}
    new = [run for runs in grouped.values() for run in runs if os.path.realpath(run.path) in given]
    since = min(run_schema.recorded_at(run) for run in new) if new else None
    sections, open_steps, revealed = [], [], []
    for hardware, runs in grouped.items():
        if err is not None:
            print(f"{fmt.terminal(hardware)}: {len(runs)} runs", file=err, flush=True)
        families = _write_pages(out, hardware, runs, open_steps, err)
        sections += [(hardware, family, rows) for family, rows in families.items()]
        if since is not None:
            found = changepoints.new_steps(runs, since, run_schema.recorded_at)
            revealed += [(hardware, s) for s in found]
    (out / "index.html").write_text(_index(sections, open_steps), encoding="utf-8")
    return revealed


def summary_markdown(revealed: list, site: str) -> str:
    """Markdown lines for a job summary: the steps the new runs revealed, linked to their pages."""
    if not revealed:
        return "No new step in the benchmark history.\n"
    lines = ["New steps in the benchmark history (tested across runs, not against one baseline):"]
    for hardware, step in revealed:
        link = f"{site.rstrip('/')}/{page_path(hardware, step.fullname)}"
        md = fmt.markdown
        lines.append(f"- [{md(step.fullname)}]({link}) on {md(hardware)}: {md(step.describe())}")
    return "\n".join(lines) + "\n"


SPARK = "▁▂▃▄▅▆▇█"
TREND_RUNS = 20  # runs shown in a job summary's trend line


def sparkline(values: Sequence[float]) -> str:
    """'▁▁▂▁█': each value as a bar between the smallest and the largest."""
    low, high = min(values), max(values)
    if high == low:
        return SPARK[0] * len(values)
    return "".join(SPARK[round((v - low) / (high - low) * (len(SPARK) - 1))] for v in values)


def regressions_markdown(regressions: list[GateRow], grouped: dict, site: str) -> str:
    """For each confirmed regression: a link to its page and a trend line of its medians over
    the newest TREND_RUNS runs of its hardware (the night's run last)."""
    if not regressions:
        return ""
    lines = ["Confirmed regressions, with their history (newest run last):", ""]
    for row in regressions:
        name = row.name
        homes = [
            (hw, runs) for hw, runs in grouped.items() if any(name in r.benchmarks for r in runs)
        ]
        if not homes:
            lines.append(
                f"- {fmt.markdown(name)}: {fmt.markdown(row.message)} (no history: not in any "
                "run given)"
            )
            continue
        hardware, runs = homes[0]
        medians = [run.benchmarks[name].median for run in changepoints.measured(runs, name)]
        shown = medians[-TREND_RUNS:]
        link = f"{site.rstrip('/')}/{page_path(hardware, name)}"
        change = row.change_percent
        change_text = "see the gate" if change is None else fmt_percent(change / 100, signed=True)
        lines.append(
            f"- [{fmt.markdown(name)}]({link}) on {fmt.markdown(hardware)}, {change_text}: "
            f"`{sparkline(shown)}` "
            f"{fmt_time(min(shown))} .. {fmt_time(max(shown))} over {len(shown)} runs"
        )
    return "\n".join(lines) + "\n\n"


def benchmark_names(runs: Sequence) -> list[str]:
    """Fullnames measured in any run, in first-seen order."""
    seen: dict[str, None] = {}
    for run in runs:
        for fullname in run.benchmarks:
            seen.setdefault(fullname)
    return list(seen)
