"""``perfgate comment GATE.json``: the pull-request comment of a gate's result, in markdown on
stdout (``perfgate.report.comment``), from the rows the gate wrote (``gate.json``, read through
its one reader) and the function diffs of its summary beside it (``gate.md``); with ``--time``,
the rows of ``perfgate check`` on the same runner as a section of their own.

Exit status: 0 with the body written (a gate that wrote no gate.json gets a body saying it did
not run), 2 with one line when GATE.json is not a gate's rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.report.comment import comment_body, no_summary_body
from perfgate.verdict.rows import RowsError, from_json


class Comment(Command):
    name = "comment"
    summary = "the pull-request comment of a gate's result, in markdown"
    description = __doc__.split("\n\n")[0]
    examples = """\
  perfgate comment perfgate-results/gate.json --base "$BASE" --head "$HEAD" \\
      --run-url "$RUN_URL" > comment.md"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "gate_json",
            type=Path,
            metavar="GATE.json",
            help="the gate's rows (--perf-gate-report's .json)",
        )
        parser.add_argument("--base", default="", metavar="SHA", help="the base branch's commit")
        parser.add_argument("--head", default="", metavar="SHA", help="the pull request's commit")
        parser.add_argument("--run-url", default="", metavar="URL", help="the job's page")
        parser.add_argument(
            "--time",
            type=Path,
            metavar="NIGHTLY-GATE.json",
            help="the rows of perfgate check on the same runner (its "
            "nightly-gate.json): a section on time after the counts'",
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        path: Path = args.gate_json
        if not path.is_file():
            out.write(no_summary_body(path.name, args.run_url))
            return 0
        rows = _rows(path)
        timed = None
        if args.time is not None:  # a check that wrote nothing is a section saying so
            timed = _rows(args.time) if args.time.is_file() else []
        summary = path.with_suffix(".md")
        try:  # the diffs are an extra: a summary that cannot be read leaves them out
            markdown = summary.read_text(encoding="utf-8", errors="replace")
        except OSError:
            markdown = ""
        out.write(comment_body(rows, markdown, args.base, args.head, args.run_url, timed))
        return 0


def _rows(path: Path) -> list:
    try:
        return from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, RowsError) as error:  # UnicodeDecodeError is a ValueError
        raise CommandError(f"{path} is not the gate's rows ({error})") from None
