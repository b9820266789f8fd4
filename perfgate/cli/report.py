"""``perfgate report``: this repository's lab report (markdown with PNG plots) from its runs."""

from __future__ import annotations

import argparse
import shlex

from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import RESULTS, Hardware, add_where


class Report(Command):
    name = "report"
    summary = "markdown report with plots for the lab"
    examples = """\
  perfgate report                           # the newest run of this hardware
  perfgate report baselines/NVIDIA-H100-80GB-HBM3/*/0002_h100-full-graph-copy.json \\
      baselines/AMD-EPYC-2cores/*/0006_cpu-default.json --out docs/report"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "runs", nargs="*", metavar="RUN", help="runs to report (default: newest)"
        )
        cls.add_out(parser, RESULTS / "report", "folder for report.md and its PNGs")
        parser.add_argument("--no-plots", action="store_true", help="markdown only, no matplotlib")
        add_where(parser)

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        from perfgate.report import answers, write_report

        hardware = Hardware(args.baselines, args.hardware)
        print("reading runs...", file=err, flush=True)
        runs = [hardware.resolve(a) for a in args.runs] if args.runs else hardware.newest(1)
        if not answers(runs):
            raise CommandError(
                "perfgate report writes this repository's lab report (its torch.compile, SDPA "
                f"and MXINT8 cases), and {runs[0].path} has none of them; for any project's "
                "runs use perfgate compare or perfgate history"
            )
        command = shlex.join(["perfgate", *args.argv])
        path, pngs = write_report(runs, args.out, not args.no_plots, err, command)
        print(f"wrote {path} and {len(pngs)} plots", file=out)
        return 0
