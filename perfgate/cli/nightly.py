"""``perfgate nightly`` and ``perfgate check``: the gate on time across sessions
(``perfgate.ab.night``). First the stored comparison (``pytest TESTS --perf-gate``, the tests
against this machine's newest baseline); then every case it cannot settle is judged by an
interleaved A/B between the baseline's commit and the tree under test, on the same machine (and
GPUs), at ``--target`` (3 %). A case the A/B finds slower fails; so does a stored regression the
A/B cannot clear; an undecided case warns, or fails with ``--undecided fail``. The report says,
per case, which comparison decided. ``--shards`` joins the nights of the N runners of a sharded
nightly (``--perf-shard I/N``) into one. ``check`` is the same command, named for a CI job on
any machine (a pull request's, a CPU runner's); ``nightly`` for the scheduled GPU job.

Exit status: 0 the night passes, 1 a regression (A/B-confirmed, or stored and not cleared), an
undecided case under ``--undecided fail``, or a failing test, 2 an error (one
line), 3 ``--shards`` that are not the N shards of one night, pytest's own status when the stored
comparison could not run (4 usage, 6 gate could not run), 6 when the night gated no case, 75
when ``--time-limit`` stopped the A/B with cases undecided, 130 interrupted (``--resume``
continues after both).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.ab import AbError, exits, fanin, gpus, journal, night
from perfgate.arguments import add_count, add_fraction, add_test_paths
from perfgate.benchmark import Run
from perfgate.cli.ab import add_run_options, test_paths, time_limit
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import Hardware
from perfgate.stats import MIN_PAIRS
from perfgate.verdict import nightly as policy


class Nightly(Command):
    name = "nightly"
    summary = "the nightly gate: stored comparison, then an A/B of what it cannot settle"
    description = __doc__.split("\n\n")[0]
    examples = """\
  perfgate nightly --tests benchmarks -- --device cuda
  perfgate nightly --confirm-only --results perfgate-results  # its gate.json is there already"""
    usage = (
        "perfgate nightly [-h] [--results DIR] [--confirm-only] [--base-ref REF] "
        "[--baseline RUN] [--tests PATH ...] [--screen FRACTION] [--target FRACTION] "
        "[--blocks B] [--more-blocks M] [--undecided {warn,fail}] [--gpus G] "
        "[--time-limit T] [--resume] "
        "[--shards DIR ...] [-- PYTEST_ARG ...]"
    )
    takes_pytest_args = True
    interrupted = "nothing was decided"  # the night's own line says more (``run``)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--results",
            type=Path,
            default=night.RESULTS,
            metavar="DIR",
            help="folder for gate.*, nightly.json, ab.json, nightly.md",
        )
        parser.add_argument(
            "--confirm-only",
            action="store_true",
            help="skip the stored comparison; read DIR/gate.json",
        )
        parser.add_argument(
            "--base-ref", metavar="REF", help="A's commit (default: the baseline's)"
        )
        parser.add_argument("--baseline", metavar="RUN", help="baseline run file")
        add_test_paths(parser.add_argument)
        add_fraction(
            parser.add_argument,
            "--screen",
            night.SCREEN,
            "stored change that sends a gated case to the A/B",
        )
        add_fraction(parser.add_argument, "--target", night.TARGET, "the A/B's threshold")
        add_count(parser.add_argument, "--blocks", 3, MIN_PAIRS, "A/B block pairs", "B")
        add_count(
            parser.add_argument,
            "--more-blocks",
            night.MORE_BLOCKS,
            0,
            "more block pairs for the cases left undecided",
            "M",
        )
        parser.add_argument(
            "--undecided",
            choices=policy.UNDECIDED_POLICIES,
            default="warn",
            help="what a case that stays undecided does: warn (listed first; "
            "the default) or fail the run (exit 1)",
        )
        add_run_options(parser)
        parser.add_argument(
            "--shards",
            nargs="+",
            type=Path,
            metavar="DIR",
            help="join the results folders of a sharded nightly's N runners "
            "into --results, and judge the night they make",
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run(args, args.pytest_args, out, err, cls.name)


class Check(Nightly):
    name = "check"
    summary = "gate time across sessions: stored comparison, then an A/B of its suspects"
    examples = """\
  perfgate check --tests tests/bench             # in CI: a baseline of another session is fine
  perfgate check --base-ref origin/main --tests tests/bench"""
    usage = Nightly.usage.replace("perfgate nightly", "perfgate check", 1)


def options_from(args, pytest_args: list[str], command: str = "nightly") -> night.NightlyOptions:
    """The night of the parsed command line (each value checked by its option's type)."""
    if args.resume and args.confirm_only:
        raise CommandError("--resume continues from DIR/gate.json already: drop --confirm-only")
    return night.NightlyOptions(
        args.results,
        args.confirm_only,
        args.resume,
        args.base_ref,
        args.baseline,
        gate_baseline,
        args.screen,
        args.target,
        args.blocks,
        args.more_blocks,
        pytest_args,
        test_paths(args.tests),
        gpus.lanes(args.gpus),
        time_limit(args.time_limit),
        args.undecided,
        command,
    )


def gate_baseline(wanted: str | None, key: str | None) -> Run:
    """The run named by --baseline, else the newest of the stored comparison's hardware key."""
    hardware = Hardware(None, key)
    return hardware.resolve(wanted) if wanted else hardware.newest(1)[0]


def run(args, pytest_args: list[str], out, err, command: str = "nightly") -> int:
    if args.shards:
        return fanin.fan_in(args.shards, args.results, out, err, command)
    options = options_from(args, pytest_args, command)
    with journal.only_one(options.journal):  # one night (or A/B) in a results folder at a time
        try:
            return night.run_nightly(options, out, err)
        except KeyboardInterrupt:  # before the A/B's blocks (that one writes what it decided)
            raise CommandError(
                interrupted(options.journal), exits.INTERRUPTED_STATUS, "interrupted"
            ) from None


def interrupted(folder: Path) -> str:
    """What an interrupt left: an A/B's journal to resume, or nothing to continue."""
    try:
        kept = journal.unfinished(folder)
    except AbError:
        kept = False
    if kept:
        return f"the A/B's completed blocks are kept in {folder}: --resume continues it"
    return "nothing to resume: run the night again"
