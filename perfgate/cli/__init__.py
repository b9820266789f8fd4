"""The ``perfgate`` command: triage, gating and bisection over pytest-benchmark runs.

Thin: each command (``cli.command.Command``) adds its parser and runs; ``main`` dispatches from
the table ``COMMANDS``. ``main(argv)`` returns the exit status: 0 on success, 2 for an error (one
line on stderr, ``perfgate NAME: error: ...``, naming what to do), 3 for shards ``merge`` refuses
to join, 130 after Ctrl-C or SIGTERM, pytest's status for ``profile``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from perfgate import __version__
from perfgate import format as fmt
from perfgate.ab import AbError
from perfgate.cli import ab, bisect, compare, dashboard, guard, history, merge, nightly, profile
from perfgate.cli.command import Command
from perfgate.cli.comment import Comment
from perfgate.cli.guard import CommandError
from perfgate.cli.init import Init
from perfgate.outputs import BadOutput
from perfgate.report.dashboard import DashboardError
from perfgate.report.plots import PlotsUnavailable
from perfgate.store import StoreError
from perfgate.verdict.steps import StepsUnavailable

INTERRUPTED = 130  # exit status after Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)
COMMANDS: tuple[type[Command], ...] = (
    compare.Compare,
    history.History,
    profile.Profile,
    ab.Ab,
    nightly.Nightly,
    nightly.Check,
    dashboard.Dashboard,
    bisect.Bisect,
    merge.Merge,
    Init,
    Comment,
)
# what a command cannot do, said in one line: the store's, the A/B's, the plots' and the steps'
ONE_LINE = (StoreError, AbError, PlotsUnavailable, BadOutput, StepsUnavailable, DashboardError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perfgate",
        description="Triage the pytest-benchmark runs of a project. RUN is a JSON file, or a "
        "run number or name fragment in <baseline root>/<hardware key>/.",
        epilog="examples:\n" + "\n".join(c.examples for c in COMMANDS[:4]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"perfgate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None, out=None, err=None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = out or sys.stdout, err or sys.stderr
    given, pytest_args = argv, []
    if "--" in argv:
        given, pytest_args = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = build_parser()
    args = parser.parse_args(given)
    command: type[Command] = args.handler
    if pytest_args and not command.takes_pytest_args:
        takers = ", ".join(f"`perfgate {c.name}`" for c in COMMANDS if c.takes_pytest_args)
        parser.error(f"arguments after -- go to pytest, for {takers} only")
    args.pytest_args, args.argv = pytest_args, argv
    try:
        guard.check_outputs(args, err)
        with guard.sigterm_as_interrupt():
            return command.run(args, out, err)
    except CommandError as error:
        print(f"perfgate {command.name}: {error.label}: {fmt.terminal(error)}", file=err)
        return error.status
    except ONE_LINE as error:
        print(f"perfgate {command.name}: error: {fmt.terminal(error)}", file=err)
        return 2
    except KeyboardInterrupt:
        print(f"perfgate {command.name}: interrupted; {command.interrupted}", file=err)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
