"""The ``perfgate`` command: compare, history, report and profile over pytest-benchmark runs.

``main(argv)`` returns the exit status: 0 on success, 2 for a missing or unreadable run (one
line on stderr naming the file and what to do), 3 for shards ``merge`` refuses to join,
pytest's status for ``profile``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate import __version__
from perfgate import format as fmt
from perfgate.ab import AbError
from perfgate.cli import ab, guard, merge, nightly
from perfgate.cli.bisect import add_bisect_parser, run_bisect
from perfgate.cli.dashboard import add_dashboard_parser, run_dashboard
from perfgate.cli.guard import CommandError
from perfgate.cli.profile import DEFAULT_FOLDER as PROFILE_FOLDER
from perfgate.cli.runs import Hardware
from perfgate.outputs import BadOutput
from perfgate.report.plots import PlotsUnavailable
from perfgate.store import StoreError
from perfgate.verdict.steps import StepsUnavailable
from perfgate.verdict.thresholds import DEFAULT_ALPHA, fraction_argument, parse_thresholds

RESULTS = Path("perfgate-results")
INTERRUPTED = 130  # exit status after Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)
EXAMPLES = {
    "compare": """\
  perfgate compare                          # the newest two runs of this hardware
  perfgate compare 0003 0004 --filter attn  # runs 3 and 4, attention benchmarks only
  perfgate compare old.json new.json --markdown > compare.md""",
    "history": """\
  perfgate history 'test_attention[cuda-fp16]'
  perfgate history 'test_matmul*-32]' --hardware NVIDIA-H100-80GB-HBM3 --out plots/""",
    "report": """\
  perfgate report                           # the newest run of this hardware
  perfgate report baselines/NVIDIA-H100-80GB-HBM3/*/0002_h100-full-graph-copy.json \\
      baselines/AMD-EPYC-2cores/*/0006_cpu-default.json --out docs/report""",
    "profile": """\
  perfgate profile 'tests/test_attention.py::test_attention[cpu-fp32]'
  perfgate profile 'tests/test_attention.py::test_attention[cuda-fp16]' \\
      --out prof/ -- -p no:randomly    # arguments after -- go to pytest""",
}


def _subparser(commands, name: str, summary: str, parents=()) -> argparse.ArgumentParser:
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog="examples:\n" + EXAMPLES[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("where saved runs are looked up")
    where.add_argument("--baselines", metavar="DIR", help="baseline root (default: ./baselines)")
    where.add_argument("--hardware", metavar="KEY", help="hardware folder (default: this one)")
    parser = argparse.ArgumentParser(
        prog="perfgate",
        description="Triage the pytest-benchmark runs of a project. RUN is a JSON file, or a "
        "run number or name fragment in <baseline root>/<hardware key>/.",
        epilog="examples:\n" + "\n".join(EXAMPLES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compare = _subparser(commands, "compare", "compare two runs benchmark by benchmark", [common])
    compare.add_argument(
        "run_a", nargs="?", metavar="RUN_A", help="baseline (default: the 2nd newest run)"
    )
    compare.add_argument(
        "run_b", nargs="?", metavar="RUN_B", help="current (default: the newest run)"
    )
    compare.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="PATTERN",
        help="glob or substring of the benchmark name (repeatable)",
    )
    compare.add_argument("--markdown", action="store_true", help="print GitHub markdown")
    compare.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    compare.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="[NAME=]FRACTION",
        help="smallest change called a regression or improvement, for every benchmark or for a "
        "family or test (repeatable; default: what a test declared, else from each case's "
        "measured noise), as --perf-gate-threshold takes it: 0.1 or 10%%, a bare 10 is refused",
    )
    compare.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help="one-sided Mann-Whitney significance level (default: %(default)s)",
    )

    history = _subparser(commands, "history", "one benchmark across every saved run", [common])
    history.add_argument("pattern", metavar="PATTERN", help="glob or substring of the name")
    history.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        metavar="DIR",
        help="folder for the PNG plots (default: %(default)s)",
    )
    history.add_argument(
        "--max-plots",
        type=int,
        default=12,
        metavar="N",
        help="plot at most N benchmarks (default: %(default)s)",
    )
    history.add_argument("--no-plots", action="store_true", help="tables only")
    history.add_argument("--markdown", action="store_true", help="print GitHub markdown")

    report = _subparser(commands, "report", "markdown report with plots for the lab", [common])
    report.add_argument("runs", nargs="*", metavar="RUN", help="runs to report (default: newest)")
    report.add_argument(
        "--out",
        type=Path,
        default=RESULTS / "report",
        metavar="DIR",
        help="folder for report.md and its PNGs (default: %(default)s)",
    )
    report.add_argument("--no-plots", action="store_true", help="markdown only, no matplotlib")

    profile = _subparser(commands, "profile", "one benchmark case under torch.profiler")
    profile.usage = "perfgate profile [-h] [--out DIR] TEST_ID [-- PYTEST_ARG ...]"
    profile.add_argument("test_id", metavar="TEST_ID", help="a pytest id of one benchmark case")
    profile.add_argument(
        "--out",
        type=Path,
        default=PROFILE_FOLDER,
        metavar="DIR",
        help="folder for the tables and traces (default: %(default)s)",
    )
    ab.add_parser(commands)
    nightly.add_parser(commands, fraction_argument)
    add_dashboard_parser(commands, argparse.RawDescriptionHelpFormatter)
    add_bisect_parser(commands, argparse.RawDescriptionHelpFormatter)
    merge.add_parser(commands, argparse.RawDescriptionHelpFormatter)
    return parser


def _compare(args, hardware: Hardware, out, err) -> int:
    from perfgate.cli.compare import compare_json, compare_text

    explicit = [a for a in (args.run_a, args.run_b) if a]
    print("reading runs...", file=err, flush=True)
    if len(explicit) == 1:
        a, b = hardware.resolve(explicit[0]), hardware.newest(1)[0]
    elif explicit:
        a, b = (hardware.resolve(argument) for argument in explicit)
    else:
        a, b = hardware.newest(2)
    if a.path.resolve() == b.path.resolve():
        raise CommandError(f"RUN_A and RUN_B are the same file ({a.path}); name two runs")
    try:
        thresholds = parse_thresholds(args.threshold, alpha=args.alpha)
    except ValueError as error:
        raise CommandError(f"--threshold: {error}") from None
    if args.json:
        out.write(compare_json(a, b, thresholds, args.filter))
    else:
        out.write(compare_text(a, b, thresholds, args.filter, args.markdown))
    return 0


def _history(args, hardware: Hardware, out, err) -> int:
    from perfgate.report.history import history_text, matching_benchmarks

    print(f"reading runs from {hardware.folder}...", file=err, flush=True)
    runs = hardware.runs()
    if not matching_benchmarks(runs, args.pattern):
        raise CommandError(
            f"no benchmark matches '{args.pattern}' in {len(runs)} runs of {hardware.folder}; "
            "pass a glob or part of a benchmark's name"
        )
    plots = None if args.no_plots else args.out
    if plots is not None and not _has_matplotlib():
        plots = None  # the tables are the history; the plots are an extra
        print("perfgate history: no plots: matplotlib is not installed (pip install "
              "'perfgate[report]'; --no-plots says you want none)", file=err)  # fmt: skip
    out.write(history_text(runs, args.pattern, plots, args.max_plots, args.markdown, err))
    return 0


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _report(args, hardware: Hardware, out, err, argv: Sequence[str]) -> int:
    from perfgate.report import answers, write_report

    print("reading runs...", file=err, flush=True)
    runs = [hardware.resolve(a) for a in args.runs] if args.runs else hardware.newest(1)
    if not answers(runs):
        raise CommandError(
            "perfgate report writes this repository's lab report (its torch.compile, SDPA and "
            f"MXINT8 cases), and {runs[0].path} has none of them; for any project's runs use "
            "perfgate compare or perfgate history"
        )
    command = shlex.join(["perfgate", *argv])
    path, pngs = write_report(runs, args.out, not args.no_plots, err, command)
    print(f"wrote {path} and {len(pngs)} plots", file=out)
    return 0


def main(argv: Sequence[str] | None = None, out=None, err=None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = out or sys.stdout, err or sys.stderr
    extra: list[str] = []
    if "--" in argv:
        argv, extra = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if extra and args.command not in ("profile", "ab", "bisect", "nightly"):
        parser.error(
            "arguments after -- go to pytest, for `perfgate profile`, `ab`, `bisect` and "
            "`nightly` only"
        )
    try:
        guard.check_outputs(args, err)
        with guard.sigterm_as_interrupt():
            return _run(args, extra, argv, out, err)
    except (CommandError, StoreError, PlotsUnavailable, BadOutput, StepsUnavailable,
            AbError) as error:  # fmt: skip
        print(f"perfgate {args.command}: error: {fmt.terminal(error)}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"perfgate {args.command}: interrupted; nothing was left half-written", file=err)
        return INTERRUPTED


def _run(args, extra: list[str], argv: Sequence[str], out, err) -> int:
    hardware = Hardware(getattr(args, "baselines", None), getattr(args, "hardware", None))
    if args.command == "compare":
        return _compare(args, hardware, out, err)
    if args.command == "history":
        return _history(args, hardware, out, err)
    if args.command == "report":
        return _report(args, hardware, out, err, argv)
    if args.command == "ab":
        return ab.run(ab.options_from(args, extra), args.out, out, err)
    if args.command == "nightly":
        return nightly.run(args, extra, out, err)
    if args.command == "dashboard":
        return run_dashboard(args, out, err)
    if args.command == "bisect":
        return run_bisect(args, extra, out, err)
    if args.command == "merge":
        return merge.run_merge(args, out, err)
    from perfgate.cli.profile import run_profile

    return run_profile(args.test_id, args.out, extra, out, err)


if __name__ == "__main__":
    sys.exit(main())
