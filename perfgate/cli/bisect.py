"""``perfgate bisect GOOD BAD -k CASE``: the first commit that made a benchmark slower, found by
``perfgate.ab.bisect`` in a temporary git worktree (the user's checkout is never touched).

Exit status: 0 first bad commit named; 1 BAD is not slower than GOOD; 2 usage, git or
measurement error; 130 interrupted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.ab.bisect import run_bisect
from perfgate.ab.bisect_steps import add_step_arguments
from perfgate.cli.command import Command


class Bisect(Command):
    name = "bisect"
    summary = "find the first commit that made a benchmark slower (git bisect run)"
    description = (
        summary + ". GOOD and BAD are measured first, then `git bisect run` measures each "
        "commit it picks, in a temporary git worktree (your checkout is never touched): bad = "
        "slower than GOOD by the gate's time rule (past the threshold and significant, or every "
        "round slower past it where rounds are too few for a test); a commit where the case "
        "does not run, or that cannot be decided, is skipped. Exit status: 0 first bad commit "
        "named, 1 BAD is not slower than GOOD, 2 error, 130 interrupted."
    )
    examples = """\
  perfgate bisect v1.0 HEAD -k 'test_matmul and triton-32'
  perfgate bisect abc123 main -k flash-fp16 --threshold 5% -- --device cuda"""
    usage = "perfgate bisect [options] GOOD BAD -k CASE [-- PYTEST_ARG ...]"
    takes_pytest_args = True
    interrupted = "the repository is left as it was"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("good", metavar="GOOD", help="a commit where the case was fast")
        parser.add_argument("bad", metavar="BAD", help="a later commit where it is slow")
        add_step_arguments(parser.add_argument)
        cls.add_out(
            parser, Path("perfgate-results") / "bisect", "folder for the step log and measurements"
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run_bisect(args, args.pytest_args, out, err)
