"""One benchmark's page of the dashboard: its history plot (plotly) and tables.

The plot shows the median per run with the interquartile band of its rounds, a dashed line where
the environment changed (torch, Triton, CUDA, cuDNN, driver, Python, host malloc), a red line at
each detected step, and, beside the times, the same-run ratios its test declares
(``perfgate.Ratio``: a speedup over a reference case, a stored fraction of a roofline).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfgate.benchmark import describe_changes, environment_changes
from perfgate.format import fmt_change, fmt_iqr, fmt_percent, fmt_time, html, time_unit
from perfgate.verdict.pairing import RatioValue, declarations_of, same_run_ratios
from perfgate.verdict.steps import Step

PAGE_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f2f2f2; }
.slower { color: #b00020; font-weight: bold; }
.faster { color: #1b7a1b; font-weight: bold; }
.muted { color: #777; }
"""


def page(title: str, body: str, script_prefix: str = "") -> str:
    """A whole HTML page; ``script_prefix`` is the relative path to plotly.min.js's folder."""
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html(title)}</title><style>{PAGE_STYLE}</style>"
        f"<script src='{script_prefix}plotly.min.js'></script></head>"
        f"<body>\n{body}\n</body></html>\n"
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    """An HTML table; cells are HTML already (escape text before)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{css}'><tr>{head}</tr>{body}</table>"


def declared_ratios(runs: Sequence) -> dict[Path, dict[str, list[RatioValue]]]:
    """Per run (by its path), the same-run ratios its tests declared (``perfgate.Ratio``: a
    stored field, or a case against its reference case of the same run), by case; a run saved
    before its tests declared ratios borrows the newest declarations, as the gate does."""
    declared = declarations_of(*reversed(runs))
    return {run.path: same_run_ratios(run, declared) for run in runs}


def ratio_series(runs: Sequence, fullname: str, ratios: dict) -> dict[str, list[float | None]]:
    """{ratio name: value per run} for every declared ratio of the case (``declared_ratios``)."""
    values = [{r.name: r.value for r in ratios.get(run.path, {}).get(fullname, [])} for run in runs]
    names = dict.fromkeys(name for found in values for name in found)
    return {name: [found.get(name) for found in values] for name in names}


def environment_marks(runs: Sequence) -> list[tuple[int, str]]:
    """(index of the first run in the new environment, what changed)."""
    marks = []
    for i in range(1, len(runs)):
        changes = environment_changes(runs[i - 1].environment, runs[i].environment)
        if changes:
            marks.append((i, describe_changes(changes)))
    return marks


def figure(runs: Sequence, fullname: str, steps: Sequence[Step], ratios: dict):
    """The plotly figure of one benchmark over ``runs`` (only runs that measured it), with its
    declared ratios (``declared_ratios``) beside the times."""
    from plotly.subplots import make_subplots

    ratios = ratio_series(runs, fullname, ratios)
    columns = 2 if ratios else 1
    titles = ["median time per call, band: q1 to q3 of the rounds", "declared ratios"]
    fig = make_subplots(
        rows=1, cols=columns, column_widths=[0.62, 0.38][:columns], subplot_titles=titles[:columns]
    )
    benchmarks = [run.benchmarks[fullname] for run in runs]
    unit, scale = time_unit(max(b.median for b in benchmarks))
    labels = [run_label(run) for run in runs]
    # the band: q1 to q3 of the rounds, the median twice where no rounds were saved
    low, high = zip(*(b.quartiles or (b.median, b.median) for b in benchmarks), strict=True)
    band = dict(mode="lines", line=dict(width=0), hoverinfo="skip", showlegend=False)
    fig.add_scatter(x=labels, y=[q / scale for q in low], row=1, col=1, **band)
    fig.add_scatter(
        x=labels,
        y=[q / scale for q in high],
        fill="tonexty",
        fillcolor="rgba(31,119,180,0.2)",
        name="q1 to q3",
        row=1,
        col=1,
        **{k: v for k, v in band.items() if k != "showlegend"},
    )
    hover = [
        f"{html(run.path.name)}<br>{html(run.datetime[:19])}<br>"
        f"commit {html(short_commit(run))}<br>"
        f"median {fmt_time(b.median)}, {b.rounds} rounds"
        for run, b in zip(runs, benchmarks, strict=True)
    ]
    fig.add_scatter(
        x=labels,
        y=[b.median / scale for b in benchmarks],
        mode="lines+markers",
        name="median",
        text=hover,
        hoverinfo="text",
        line=dict(color="#1f77b4"),
        row=1,
        col=1,
    )
    _mark(fig, environment_marks(runs), len(runs), "#888", "dash", "env: ")
    where = {str(run.path): i for i, run in enumerate(runs)}
    step_marks = [
        (where[str(s.run.path)], f"step {fmt_percent(s.change_percent / 100, signed=True)}")
        for s in steps
    ]
    _mark(fig, step_marks, len(runs), "#d62728", "solid", "")
    fig.update_yaxes(title_text=f"median ({unit})", row=1, col=1)
    fig.update_xaxes(range=[-0.5, len(labels) - 0.5], row=1, col=1)  # annotations widen it
    for key, values in ratios.items():
        points = [(x, v) for x, v in zip(labels, values, strict=True) if v is not None]
        xs, ys = zip(*points, strict=True) if points else ((), ())
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=key, row=1, col=2)
    if ratios:
        fig.update_yaxes(title_text="ratio", row=1, col=2)
    fig.update_xaxes(type="category", tickangle=-40)
    fig.update_layout(height=460, margin=dict(t=60, b=110), legend=dict(orientation="h", y=-0.35))
    return fig


def _mark(fig, marks: Sequence[tuple[int, str]], runs: int, color: str, dash: str, prefix: str):
    """A vertical line before each marked run (time panel), labelled at the top, on the side
    with more room."""
    for index, text in marks:
        fig.add_vline(
            x=index - 0.5,
            line=dict(color=color, dash=dash, width=2),
            annotation=dict(text=html(prefix + text), font=dict(color=color, size=11)),
            annotation_position="top right" if index < runs / 2 else "top left",
            row=1,
            col=1,
        )


def run_rows(runs: Sequence, fullname: str) -> list[list[str]]:
    rows, previous, marks = [], None, dict(environment_marks(runs))
    for i, run in enumerate(runs):
        b = run.benchmarks[fullname]
        change = fmt_change(previous, b.median)
        previous = b.median
        rows.append(
            [
                html(run.path.name),
                html(run.datetime[:16].replace("T", " ")),
                html(short_commit(run)),
                fmt_time(b.median),
                fmt_iqr(b.quartiles),
                str(b.rounds),
                change,
                html(marks.get(i, "")),
            ]
        )
    return rows


def step_cell(step: Step | None) -> str:
    """A step as a coloured HTML snippet, or a muted 'none'."""
    if step is None:
        return "<span class='muted'>none</span>"
    css = "slower" if step.after > step.before else "faster"
    return f"<span class='step {css}'>{html(step.describe())}</span>"


def benchmark_page(
    runs: Sequence, fullname: str, hardware: str, steps: Sequence[Step], ratios: dict
) -> str:
    """The HTML of one benchmark's page (plotly.min.js one folder up); ``ratios``: the runs'
    ``declared_ratios``."""
    first = runs[0].benchmarks[fullname]
    plot = figure(runs, fullname, steps, ratios).to_html(
        full_html=False, include_plotlyjs=False, div_id="history"
    )
    headers = ["run", "date (UTC)", "commit", "median", "IQR", "rounds", "vs previous", "env"]
    body = [
        "<p><a href='../index.html'>&larr; all benchmarks</a></p>",
        f"<h1>{html(first.name)}</h1>",
        f"<p>{html(fullname)}<br>hardware {html(hardware)}, {_group(first)}{len(runs)} runs</p>",
        plot,
        "<h2>Steps</h2>",
        "<ul>" + "".join(f"<li>{step_cell(s)}</li>" for s in steps) + "</ul>"
        if steps
        else "<p class='muted'>no significant step (PELT + permutation test: the triage guide, "
        "change points)</p>",
        "<h2>Runs</h2>",
        table(headers, run_rows(runs, fullname)),
    ]
    return page(f"{first.name} on {hardware}: {fullname}", "\n".join(body), script_prefix="../")


def _group(benchmark) -> str:
    """'group NAME, ' for a benchmark in a pytest-benchmark group, else nothing."""
    return f"group {html(benchmark.group_label)}, " if benchmark.group_label else ""


def run_label(run) -> str:
    """'0003 11-22 06:44' for a saved run, else the file stem and date."""
    stem = Path(run.path).stem
    short = stem[:4] if stem[:4].isdigit() else stem[:16]
    return f"{short} {run.datetime[5:16].replace('T', ' ')}".strip()


def short_commit(run) -> str:
    return (run.commit or "?")[:8]
