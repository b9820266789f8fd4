"""``perfgate dashboard``: a static HTML site of every benchmark's history, viewable from disk.

The site (``perfgate.report.dashboard``) is built from every hardware folder under the baseline
root plus any run files given (e.g. the night's ``--benchmark-json``), which join their
hardware's history. Steps that those run files revealed are printed as markdown on stdout (and
appended to ``--summary FILE``), for a CI job summary.

Exit status: 0 written, 2 a run that cannot be read, no runs at all, plotly missing, an
output folder holding files that are not a dashboard, or a disk that filled up (one line; the
site is as it was before, the summary file too).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from perfgate import arguments
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.history_runs import runs_by_hardware
from perfgate.cli.runs import store_root
from perfgate.outputs import append_whole, disk_problem
from perfgate.report.dashboard import (
    DashboardError,
    build,
    regressions_markdown,
    summary_markdown,
)
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.rows import GateRow, from_json


def read_gate_regressions(path: Path) -> list[GateRow]:
    """The confirmed regressions of a gate's JSON summary (``--perf-gate-report``'s twin)."""
    try:
        rows = from_json(json.loads(path.read_text(encoding="utf-8")))
        return [row for row in rows if row.verdict is Verdict.REGRESSION]
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise DashboardError(
            f"{path} is not a perfgate gate summary ({error}); pass the gate.json that "
            "--perf-gate wrote beside gate.md"
        ) from None


def run_dashboard(args: argparse.Namespace, out, err) -> int:
    """Build the site; returns the exit status (see the module docstring)."""
    root = store_root(args.baselines).path
    regressions = read_gate_regressions(args.gate) if args.gate else []
    grouped = runs_by_hardware(root, args.runs)
    if not grouped:
        raise DashboardError(
            f"no saved runs under {root} and no run files given; pass --baselines DIR or RUN.json"
        )
    index, revealed = build(grouped, args.runs, args.out, err)
    print(f"wrote {index}", file=err)
    if args.runs or regressions:
        text = regressions_markdown(regressions, grouped, args.link_base)
        text += summary_markdown(revealed, args.link_base)
        out.write(text)
        if args.summary:
            try:
                append_whole(args.summary, text)
            except OSError as error:
                raise CommandError(
                    f"{disk_problem(error, '--summary')}; the site is written ({index})"
                ) from None
    return 0


class Dashboard(Command):
    name = "dashboard"
    summary = "static HTML history of every benchmark, with steps and environment changes"
    description = (
        summary + ". Built from every hardware folder under the baseline root plus the RUN.json "
        "files given (e.g. the night's --benchmark-json), which join their hardware's history; "
        "the steps those files revealed are printed as markdown. The site opens from disk: "
        "DIR/index.html. Exit status: 0 written, 2 error."
    )
    examples = """\
  perfgate dashboard --out docs/dashboard
  perfgate dashboard --out perfgate-results/dashboard perfgate-results/nightly.json"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "runs", nargs="*", type=Path, metavar="RUN.json", help="extra run files"
        )
        cls.add_out(parser, None, "site folder", required=True)
        arguments.add_baselines(parser.add_argument, "--baselines")
        parser.add_argument(
            "--summary",
            type=Path,
            metavar="FILE",
            help="also append the new steps (markdown) to FILE, e.g. $GITHUB_STEP_SUMMARY",
        )
        parser.add_argument(
            "--gate",
            type=Path,
            metavar="GATE.json",
            help="the gate's JSON summary of the night: each confirmed regression is listed first, "
            "linked to its page, with a trend line of its history",
        )
        parser.add_argument(
            "--link-base",
            default=".",
            metavar="URL",
            help="prefix of page links in the printed new steps (default: %(default)s)",
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run_dashboard(args, out, err)
