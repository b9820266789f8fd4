"""``perfgate ab BASE_REF``: interleaved A/B (``perfgate.ab``). BASE_REF's tree (A, checked out
into a temporary git worktree) and this tree (B, as it is on disk) run the selected cases in
counterbalanced block pairs (A B, B A, ...), each tree in a long-lived process per GPU; each case
is compared pair by pair by the gate's rules and words (``verdict.paired``).

Exit status: 0 no case is a regression (and one was gated), 1 one is, 2 an error (one line on
stderr), 6 no case was gated, 75 ``--time-limit`` stopped it with cases undecided, 130
interrupted; the last two write what was decided and keep the blocks for ``--resume``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from perfgate.ab import blocks, compare, gpus
from perfgate.arguments import add_count, add_test_paths, add_thresholds
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.report.ab import table, verdict_lines
from perfgate.stats import MIN_PAIRS
from perfgate.verdict import summary
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.thresholds import parse_thresholds

GATED_NOTHING, INCOMPLETE, INTERRUPTED = 6, 75, 130
OUT = Path("perfgate-results") / "ab.json"


def test_paths(tests: list[str] | None) -> list[str]:
    """The test paths a block runs: --tests, else none (the project's own: pytest's testpaths,
    or the current folder)."""
    return list(tests or [])


def time_limit(text: str | None) -> float | None:
    """``--time-limit``: seconds (``545``, ``545s``, ``9m``, ``1h``) as a deadline on the
    monotonic clock, from now."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise CommandError(f"--time-limit {text!r}: a duration such as 545, 545s, 9m or 1h")
    return time.monotonic() + seconds


def journal_of(out: Path) -> Path:
    """Where the blocks of the A/B writing ``out`` are kept: ``ab.json`` -> ``ab-blocks/``."""
    return out.with_name(f"{out.stem}-blocks")


def options_from(args, pytest_args: list[str]) -> compare.AbOptions:
    """The A/B of the parsed command line (each value checked by its option's type)."""
    thresholds = parse_thresholds(args.threshold)
    selection = test_paths(args.tests)
    selection += ["-k", args.expression] if args.expression else []
    return compare.AbOptions(
        args.base_ref,
        selection,
        args.blocks,
        0,
        args.rounds_per_block,
        pytest_args,
        thresholds,
        args.out.parent,
        journal_of(args.out),
        gpus.lanes(args.gpus),
        args.resume,
        time_limit(args.time_limit),
    )


def run(options: compare.AbOptions, out_file: Path, out, err) -> int:
    done = compare.run_ab(options, err)
    if not done.results:
        only = ", ".join(f"{len(v)} only in {k}" for k, v in done.only.items() if v)
        raise CommandError(
            "no case ran in both trees"
            + (f" ({only})" if only else "")
            + ": check --tests, -k and the pytest arguments"
        )
    text = json.dumps(compare.as_json(done, options), indent=2, allow_nan=False)
    try:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(text + "\n", encoding="utf-8")
    except OSError as error:  # a full disk: the blocks are kept, --resume writes it again
        raise blocks.not_written(out_file, error) from None
    print(
        f"A = {options.base_ref} ({done.commit[:12]}), B = this tree as it is on disk; "
        f"{options.blocks} counterbalanced block pairs (A B, B A, ...)",
        file=out,
    )
    print(table(done.results), file=out)
    print("\n".join(verdict_lines(done.results)), file=out)
    print(f"{summary.counts(done.results)}; written to {out_file}", file=out)
    if note := compare.remaining_note(done, options.journal):
        print(f"perfgate ab: {note}", file=err)
    if any(r.verdict is Verdict.REGRESSION for r in done.results):
        return 1
    if done.stopped == compare.INTERRUPTED:
        return INTERRUPTED
    if done.remaining:
        return INCOMPLETE
    if not any(r.verdict.gated for r in done.results):
        print(
            f"perfgate ab: no case was decided ({len(done.results)} compared, each undecided "
            "or not gated): it cannot pass; more --blocks, or see why in the table",
            file=err,
        )
        return GATED_NOTHING
    return 0


class Ab(Command):
    name = "ab"
    summary = "interleaved A/B of BASE_REF against this tree"
    description = (
        "Run the selected cases of BASE_REF's tree (A, in a temporary git worktree) and of this "
        "tree (B) in counterbalanced block pairs (A B, B A, ...), one long-lived process per "
        "tree and GPU, and compare them pair by pair with the gate's rules. Exit 1 on a "
        "regression, 2 on an error, 6 when no case was gated, 75 when --time-limit stopped it, "
        "130 when interrupted (then --resume continues)."
    )
    examples = "  perfgate ab main -k 'attention and cuda' --blocks 6 -- --device cuda"
    usage = (
        "perfgate ab [-h] [--tests PATH ...] [-k EXPR] [--blocks B] [--rounds-per-block N] "
        "[--threshold [NAME=]FRACTION] [--out FILE] [--gpus G] [--time-limit T] [--resume] "
        "BASE_REF [-- PYTEST_ARG ...]"
    )
    takes_pytest_args = True
    out_is_file = True
    interrupted = "the base worktree was removed"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "base_ref", metavar="BASE_REF", help="commit or branch to compare with (A)"
        )
        add_test_paths(parser.add_argument)
        parser.add_argument("-k", dest="expression", metavar="EXPR", help="pytest -k selection")
        add_count(
            parser.add_argument,
            "--blocks",
            5,
            MIN_PAIRS,
            "block pairs (3 or more for significance)",
            "B",
        )
        add_count(
            parser.add_argument,
            "--rounds-per-block",
            None,
            1,
            "keep at most N rounds of a case per block",
        )
        add_thresholds(
            parser.add_argument,
            "--threshold",
            "a test's marker, else from the spread of A's blocks",
        )
        cls.add_out(
            parser, OUT, "JSON results; the blocks are kept beside it, in FILE's name with -blocks"
        )
        add_run_options(parser)

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run(options_from(args, args.pytest_args), args.out, out, err)


def add_run_options(parser) -> None:
    """The options ``ab`` and ``nightly`` share: GPUs, time limit, resume."""
    parser.add_argument(
        "--gpus",
        metavar="G",
        help="GPUs to spread the blocks over by what each case's blocks "
        "cost, its A and B blocks of a pair on one GPU: auto (the "
        "devices CUDA_VISIBLE_DEVICES lists, else one), a count, or a list "
        "such as 0,1 (default: auto)",
    )
    parser.add_argument(
        "--time-limit",
        metavar="T",
        help="start no block that would end after T (545, 545s, 9m, 1h): "
        "write what was decided and stop; --resume continues",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted or time-limited A/B from its kept blocks",
    )
