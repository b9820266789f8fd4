"""One shape for every ``perfgate`` command, as asv's ``Command``: a subclass adds its parser
(``add_arguments``) and runs (``run``); ``perfgate.cli`` dispatches from its table of them.

A command that cannot do what it was asked raises ``CommandError`` (``cli.guard``): the command
line prints it as one line, ``perfgate NAME: error: ...``, and exits with its status (2 unless it
names another)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


class Command:
    """A subcommand: its name, one-line summary, examples, and what Ctrl-C leaves behind."""

    name = ""
    summary = ""
    description = ""  # the help page's text (default: the summary)
    examples = ""
    usage: str | None = None
    takes_pytest_args = False  # the arguments after -- go to pytest
    out_is_file = False  # its --out names a file (else a folder)
    interrupted = "nothing was left half-written"  # said after Ctrl-C or SIGTERM

    @classmethod
    def add_parser(cls, commands, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
        """The command's subparser, with its arguments; parsing it selects the command."""
        parser = commands.add_parser(
            cls.name,
            help=cls.summary,
            description=cls.description or cls.summary,
            epilog=f"examples:\n{cls.examples}" if cls.examples else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=list(parents),
            usage=cls.usage,
        )
        cls.add_arguments(parser)
        parser.set_defaults(handler=cls)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The command's own arguments (none by default)."""

    @classmethod
    def add_out(
        cls,
        parser: argparse.ArgumentParser,
        default: Path | None,
        what: str,
        required: bool = False,
    ) -> None:
        """``--out``: the file (``out_is_file``) or folder the command writes, checked before it
        starts (``guard.check_outputs``)."""
        shown = "" if default is None else " (default: %(default)s)"
        metavar = "FILE" if cls.out_is_file else "DIR"
        parser.add_argument(
            "--out",
            type=Path,
            default=default,
            required=required,
            metavar=metavar,
            help=what + shown,
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        """Do the work; the exit status. ``args.pytest_args`` holds what followed ``--``,
        ``args.argv`` the command line as given."""
        raise NotImplementedError
