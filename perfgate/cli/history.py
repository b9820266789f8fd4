"""``perfgate history PATTERN``: one benchmark across every saved run of a hardware folder, as
tables (and PNG plots where matplotlib is installed), with its steps."""

from __future__ import annotations

import argparse

from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import RESULTS, Hardware, add_where, kind


class History(Command):
    name = "history"
    summary = "one benchmark across every saved run"
    examples = """\
  perfgate history 'test_attention[cuda-fp16]'
  perfgate history 'test_matmul*-32]' --hardware NVIDIA-H100-80GB-HBM3 --out plots/"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pattern", metavar="PATTERN", help="glob or substring of the name")
        cls.add_out(parser, RESULTS, "folder for the PNG plots")
        parser.add_argument(
            "--max-plots",
            type=int,
            default=12,
            metavar="N",
            help="plot at most N benchmarks (default: %(default)s)",
        )
        parser.add_argument("--no-plots", action="store_true", help="tables only")
        parser.add_argument("--markdown", action="store_true", help="print GitHub markdown")
        add_where(parser)

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        from perfgate.report.history import history_text, matching_benchmarks

        hardware = Hardware(args.baselines, args.hardware)
        print(f"reading runs from {hardware.folder}...", file=err, flush=True)
        runs = hardware.runs()
        # timed and counted runs share pytest-benchmark's own folder: one series per kind, as
        # the gate keeps them apart (a count is never a step from a time)
        kinds = [(counted, [run for run in runs if run.counted == counted]) for counted in (0, 1)]
        kinds = [(c, some) for c, some in kinds if matching_benchmarks(some, args.pattern)]
        if not kinds:
            raise CommandError(
                f"no benchmark matches '{args.pattern}' in {len(runs)} runs of "
                f"{hardware.folder}; pass a glob or part of a benchmark's name"
            )
        plots = None if args.no_plots else args.out
        if plots is not None and not _has_matplotlib():
            plots = None  # the tables are the history; the plots are an extra
            print(
                "perfgate history: no plots: matplotlib is not installed (pip install "
                "'perfgate[report]'; --no-plots says you want none)",
                file=err,
            )
        for counted, some in kinds:
            if len(kinds) > 1:  # the counted runs' plots beside the timed ones', not over them
                title = f"{kind(bool(counted))} runs ({len(some)} of {len(runs)})"
                title = f"## {title}" if args.markdown else f"{title}:"
                out.write(f"{chr(10) if counted else ''}{title}\n\n")
            folder = plots / "counted" if plots and counted and len(kinds) > 1 else plots
            out.write(history_text(some, args.pattern, folder, args.max_plots, args.markdown, err))
        return 0


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
