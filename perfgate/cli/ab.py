"""``perfgate ab BASE_REF``: interleaved A/B. BASE_REF's tree (A, checked out into a temporary git
worktree) and this tree (B, as it is on disk) run the selected cases in alternating blocks,
A B A B ..., each block one pytest session. Drift that a pair of neighbouring blocks shares
cancels in their ratio, so the comparison is pair by pair, decided by the gate's own rules and
words (``verdict.paired``) at each case's threshold (a marker, ``--threshold``, or from the
spread of A's blocks).

Exit status: 0 when no case is a regression, 1 when one is, 2 for an error (one line on
stderr), 130 when interrupted. The worktree is removed in every case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.benchmark import Run
from perfgate.cli.guard import CommandError
from perfgate.store import StoreError, read_results
from perfgate.verdict import paired, summary
from perfgate.verdict.judge import untrusted_reason
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.thresholds import Thresholds, parse_thresholds

NO_TESTS_COLLECTED = 5  # pytest's exit status
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


class AbError(CommandError):
    """Why ``perfgate ab`` cannot go on; one line that says what to do (exit 2)."""


@dataclass
class AbOptions:
    base_ref: str
    expression: str | None = None
    blocks: int = 5
    rounds_per_block: int | None = None  # keep at most this many rounds of a case per block
    pytest_args: list[str] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)
    out: Path = Path("perfgate-results") / "ab.json"
    tests: list[str] | None = None  # test paths; None: perf_tests/ where it exists, else pytest's


def test_paths(tree: Path, options: AbOptions) -> list[str]:
    """The test paths a block runs: --tests, else this repository's perf_tests/ where the tree
    has one, else none (pytest's own testpaths or the current folder)."""
    if options.tests:
        return list(options.tests)
    return ["perf_tests"] if (tree / "perf_tests").is_dir() else []


def _git(root: Path, *arguments: str) -> str:
    result = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise AbError(f"git {' '.join(arguments)} failed: {detail}")
    return result.stdout.strip()


def repository_root(cwd: Path) -> Path:
    try:
        return Path(_git(cwd, "rev-parse", "--show-toplevel"))
    except AbError:
        raise AbError(f"{cwd} is not inside a git repository; run perfgate ab in one") from None


def resolve_commit(root: Path, ref: str) -> str:
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except AbError:
        raise AbError(
            f"BASE_REF {ref!r} names no commit in {root}; give a commit or branch"
        ) from None


@contextmanager
def base_worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary folder, removed on the way out."""
    folder = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
    tree = folder / "base"
    try:
        _git(root, "worktree", "add", "--detach", str(tree), commit)
        yield tree
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)


def run_block(tree: Path, label: str, index: int, options: AbOptions, folder: Path) -> Run:
    """One pytest session of ``tree``'s test paths; its results as a Run."""
    report = folder / f"{label}-{index}.json"
    log = folder / f"{label}-{index}.log"
    command = [sys.executable, "-m", "pytest", *test_paths(tree, options), "-q",
               "-p", "no:cacheprovider", f"--benchmark-json={report}",
               *options.pytest_args]  # fmt: skip
    if options.expression:
        command += ["-k", options.expression]
    environment = {k: v for k, v in os.environ.items() if k not in XDIST_VARIABLES}
    environment["PYTHONPATH"] = os.pathsep.join([str(tree), environment.get("PYTHONPATH", "")])
    with open(log, "w", encoding="utf-8") as output:
        status = subprocess.run(command, cwd=tree, env=environment, stdout=output,
                                stderr=subprocess.STDOUT).returncode  # fmt: skip
    if status == NO_TESTS_COLLECTED:
        selection = f"-k {options.expression!r}" if options.expression else "the selection"
        raise AbError(
            f"no case of tree {label} ({tree}) matches {selection} and the pytest arguments; "
            "check it with pytest --collect-only"
        )
    if status != 0 or not report.is_file():
        kept = Path(options.out).with_suffix(f".{label}-{index}.log")
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, kept)
        raise AbError(f"block {index + 1} of tree {label} ({tree}): pytest exited {status}; its "
                      f"output is in {kept}")  # fmt: skip
    try:
        return read_results(report)
    except StoreError as error:
        raise AbError(f"block {index + 1} of tree {label}: unreadable results: {error}") from None


def run_blocks(trees: dict[str, Path], options: AbOptions, err) -> dict[str, list[Run]]:
    """A B A B ...: ``options.blocks`` sessions of each tree, alternating."""
    runs: dict[str, list[Run]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory(prefix="perfgate-ab-results-") as folder:
        for index in range(options.blocks):
            for label, tree in trees.items():
                print(f"block {index + 1}/{options.blocks}: {label}", file=err, flush=True)
                runs[label].append(run_block(tree, label, index, options, Path(folder)))
    return runs


def judge_pairs(runs: dict[str, list[Run]], options: AbOptions) -> list[GateResult]:
    """Each case that both trees ran, compared block pair by block pair by the one judge, worst
    first: untrusted when a block session's GPU was; its same-run ratios A's worst against B's
    median across blocks."""
    a_runs, b_runs = runs["A"], runs["B"]
    names = sorted(set().union(*(run.benchmarks for run in a_runs + b_runs)))
    untrusted = untrusted_reason(a_runs, b_runs[-1]) if b_runs else None
    ratios = paired.block_ratios(a_runs, b_runs)
    results = []
    for name in names:
        pairs = [
            (a.benchmarks[name], b.benchmarks[name])
            for a, b in zip(a_runs, b_runs, strict=True)
            if name in a.benchmarks and name in b.benchmarks
        ]
        results.append(paired.judge_pairs(name, pairs, options.thresholds,
                                          options.rounds_per_block, untrusted,
                                          ratios.get(name, ())))  # fmt: skip
    return sorted(results, key=lambda r: (list(Verdict).index(r.verdict), r.name))


def as_json(results: list[GateResult], options: AbOptions, commit: str) -> dict:
    rows = []
    for r in results:
        c = r.comparison
        numbers = ("ratio", "ratio_low", "ratio_high", "p_value")
        row = {"name": r.name, "verdict": r.verdict.value, "message": r.message,
               "threshold": r.threshold, "threshold_source": r.threshold_source,
               "pairs": c.n_baseline if c else 0}  # fmt: skip
        row.update({key: getattr(c, key) if c else None for key in numbers})
        rows.append(row)
    return {"base_ref": options.base_ref, "base_commit": commit, "blocks": options.blocks,
            "results": rows}  # fmt: skip


def table(results: list[GateResult]) -> str:
    from perfgate.report.tables import MISSING, fmt_time, render

    rows = []
    for r in results:
        c = r.comparison
        rows.append([
            r.name.split("::")[-1],
            fmt_time(c.baseline_median) if c else MISSING,
            fmt_time(c.current_median) if c else MISSING,
            f"{c.ratio:.4f}" if c else MISSING,
            f"[{c.ratio_low:.4f}, {c.ratio_high:.4f}]" if c and c.enough_rounds else MISSING,
            f"{c.p_value:.2g}" if c and c.enough_rounds else MISSING,
            f"{r.threshold:.1%}" if r.threshold is not None else MISSING,
            r.verdict.value,
        ])  # fmt: skip
    headers = ["benchmark", "A block median", "B block median", "B/A (paired)", "95% CI", "p",
               "threshold", "verdict"]  # fmt: skip
    return render(headers, rows, False)


def run_ab(options: AbOptions, out, err, cwd: Path | None = None) -> int:
    """Run the A/B comparison; returns the exit status (AbError propagates: exit 2)."""
    if options.blocks < 2:
        raise AbError(f"--blocks {options.blocks}: at least 2 (3 or more for significance)")
    root = repository_root(Path(cwd or Path.cwd()))
    commit = resolve_commit(root, options.base_ref)
    try:
        with base_worktree(root, commit) as base:
            runs = run_blocks({"A": base, "B": root}, options, err)
    except KeyboardInterrupt:
        print("perfgate ab: interrupted; the base worktree was removed", file=err)
        return 130
    results = judge_pairs(runs, options)
    if not results:
        raise AbError("no benchmark ran in either tree: check -k and the pytest arguments")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(as_json(results, options, commit), indent=2) + "\n")
    slower = [r for r in results if r.verdict is Verdict.REGRESSION]
    print(f"A = {options.base_ref} ({commit[:12]}), B = {root} (working tree); "
          f"{options.blocks} blocks each, alternating", file=out)  # fmt: skip
    print(table(results), file=out)
    for r in results:
        if r.verdict is not Verdict.UNCHANGED:
            print(f"  {r.name.split('::')[-1]}: {r.verdict}: {r.message}", file=out)
    print(f"{summary.counts(results)}; written to {options.out}", file=out)
    return 1 if slower else 0


def options_from(args, pytest_args: list[str]) -> AbOptions:
    rounds = args.rounds_per_block
    if rounds is not None and rounds < 1:
        raise AbError(f"--rounds-per-block {rounds}: give at least 1")
    try:
        thresholds = parse_thresholds(args.threshold)
    except ValueError as error:
        raise AbError(f"--threshold: {error}") from None
    return AbOptions(args.base_ref, args.expression, args.blocks, rounds, pytest_args,
                     thresholds, args.out, args.tests)  # fmt: skip


def add_parser(commands, parents: Sequence = ()) -> None:
    ab = commands.add_parser(
        "ab",
        help="interleaved A/B of BASE_REF against this tree",
        description="Run the selected cases of BASE_REF's tree (A, in a temporary git "
        "worktree) and of this tree (B) in alternating blocks, A B A B ..., and compare them "
        "block pair by block pair, with the gate's rules. Exit 1 on a regression, 2 on an error.",
        epilog="example:\n  perfgate ab main -k 'dequantize and cuda' --blocks 7 -- --device cuda",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )
    ab.usage = ("perfgate ab [-h] [--tests PATH ...] [-k EXPR] [--blocks B] "
                "[--rounds-per-block N] [--threshold [NAME=]FRACTION] [--out FILE] BASE_REF "
                "[-- PYTEST_ARG ...]")  # fmt: skip
    ab.add_argument("base_ref", metavar="BASE_REF", help="commit or branch to compare with (A)")
    ab.add_argument("--tests", nargs="+", metavar="PATH",
                    help="test paths to run (default: perf_tests/ where the tree has one, else "
                    "pytest's testpaths)")  # fmt: skip
    ab.add_argument("-k", dest="expression", metavar="EXPR", help="pytest -k selection")
    ab.add_argument("--blocks", type=int, default=5, metavar="B",
                    help="blocks per tree (default: %(default)s)")  # fmt: skip
    ab.add_argument("--rounds-per-block", type=int, default=None, metavar="N",
                    help="keep at most N rounds of a case per block (default: all)")  # fmt: skip
    ab.add_argument("--threshold", action="append", default=[], metavar="[NAME=]FRACTION",
                    help="slowdown that counts, as --perf-gate-threshold takes it: 0.1 or 10%% "
                    "for every case, sdpa=0.2 for a family or test (repeatable; default: a "
                    "test's marker, else from the spread of A's blocks)")  # fmt: skip
    ab.add_argument("--out", type=Path, default=AbOptions.out, metavar="FILE",
                    help="JSON results (default: %(default)s)")  # fmt: skip
