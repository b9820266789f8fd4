"""One step of ``perfgate bisect``: measure the case at the checked-out commit, judge it against
GOOD's measurement (``verdict.bisect.step_of``), log the step (``verdict.bisect.StepRow``, one
versioned line each), and answer ``git bisect run`` (0 good, 1 bad, 125 skip, 128 abort the
bisection)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from perfgate.ab import AbError, children
from perfgate.ab.children import git
from perfgate.arguments import add_alpha, add_fraction, add_test_paths
from perfgate.report.tables import render
from perfgate.store import load
from perfgate.verdict.bisect import Said, Step, StepRow, step_of, step_row, unclear
from perfgate.verdict.evidence import evidence
from perfgate.verdict.judge import judge_all
from perfgate.verdict.rows import GateRow
from perfgate.verdict.thresholds import DEFAULT_ALPHA, Thresholds

GOOD, BAD, SKIP = Step.GOOD, Step.BAD, Step.SKIP
ABORT = 128  # git bisect run stops the bisection


class BisectError(AbError):
    """A bisection that cannot go on; the message says what to do."""


def add_step_arguments(addoption) -> None:
    """What ``perfgate bisect`` and each of its steps take alike, declared once: the case, its
    test paths, the threshold and the significance level (passed on as the user wrote them)."""
    addoption("-k", dest="case", required=True, metavar="CASE", help="pytest -k")
    add_test_paths(addoption)
    add_fraction(
        addoption,
        "--threshold",
        None,
        "smallest slowdown called bad",
        "the test's marker, else from GOOD's measured noise, else 10%%",
    )
    add_alpha(addoption, DEFAULT_ALPHA)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfgate-bisect-step")
    parser.add_argument("--good-json", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--good-checkout", type=Path, required=True)
    parser.add_argument("--measure-good", action="store_true")
    # run by git bisect run, whose whole process group perfgate stops: its pytest stays in it
    parser.add_argument("--in-bisect-run", action="store_true")
    add_step_arguments(parser.add_argument)
    return parser


def _measure(args, stem: str, extra: list[str], cwd: Path) -> tuple[Path | None, str]:
    """Run the case with pytest in ``cwd``: (its benchmark JSON, '') or (None, why not)."""
    folder = args.good_json.parent
    result, log = folder / f"{stem}.json", folder / f"{stem}.log"
    command = children.pytest(
        *(args.tests or ()),
        "-k",
        args.case,
        "-q",
        "-p",
        "no:cacheprovider",
        "--benchmark-enable",
        f"--benchmark-json={result}",
        *extra,
    )
    status = children.run(command, cwd=cwd, log=log, alone=not args.in_bisect_run)
    if status != 0:
        return None, f"pytest exited {status} (see {log.name})"
    if not result.is_file() or not load(result).benchmarks:
        return None, "no benchmark ran"
    return result, ""


def judge(
    good_json: Path,
    current_json: Path,
    threshold: float | None,
    alpha: float,
    earlier_good: Path | None = None,
) -> tuple[Step, list[GateRow]]:
    """(GOOD/BAD/SKIP, one row per case measured on both sides) for a measurement, decided by
    the one judge as the gate decides a first pass (``verdict.judge.judge_case``: the same
    preconditions and rules, at the gate's threshold for each case: ``threshold`` given, else the
    test's marker, else from GOOD's measured noise, never below the device floor). BAD when a
    case is a regression (confirmed or not: the bisection measures GOOD again itself); SKIP when
    none is and one is not gated (what the gate declines: too noisy, host-bound, other code, an
    untrusted GPU) or undecided (too few rounds, slower past the threshold without significance,
    an interval wider than the threshold).
    ``earlier_good``: GOOD measured before, whose comparison confirms (the gate's re-run)."""
    good_run, now_run = load(good_json), load(current_json)
    earlier = load(earlier_good).benchmarks if earlier_good else {}
    thresholds = Thresholds(default=threshold, alpha=alpha)
    both = {name: e for name, e in evidence([good_run], now_run).items() if e.before and e.now}
    for name, found in both.items():
        if name in earlier:
            both[name] = replace(found, again=(earlier[name], found.now))
    results = judge_all(both, thresholds)
    cases = [replace(GateRow.of(r), name=both[r.name].now.name) for r in results]
    return step_of(case.verdict for case in cases), cases


def _unclear(cases: list[GateRow]) -> bool:
    return unclear(case.verdict for case in cases)


def _log(path: Path, row: StepRow) -> None:
    with path.open("a") as stream:
        stream.write(json.dumps(row.as_json(), allow_nan=False) + "\n")


def step_main(argv: list[str], cwd: Path | None = None) -> int:
    """Measure and judge the commit checked out in ``cwd`` (default: the working directory)."""
    cwd = cwd or Path.cwd()
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = _parser().parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    try:
        commit = git(cwd, "rev-parse", "HEAD")
        entry = StepRow(commit, git(cwd, "log", "-1", "--format=%s"), Said.SKIP)
        stem = "good" if args.measure_good else commit[:12]
        result, why = _measure(args, stem, extra, cwd)
        if result is None:
            _log(args.log, replace(entry, reason=why))
            return SKIP
        if args.measure_good:
            _log(args.log, replace(entry, said=Said.REFERENCE))
            return GOOD
        return _judge_step(args, entry, result, extra, cwd)
    except Exception as error:  # any failure of the step itself must stop the bisection
        print(f"perfgate bisect step: {type(error).__name__}: {error}", file=sys.stderr)
        return ABORT


def _judge_step(args, entry: StepRow, result: Path, extra: list[str], cwd: Path) -> Step:
    """GOOD/BAD/SKIP for a measurement, measuring again where one look can mislead."""
    stem = entry.commit[:12]
    verdict, cases = judge(args.good_json, result, args.threshold, args.alpha)
    reason = "" if cases else "no case in common with GOOD"
    if cases and _unclear(cases):
        # neither slower nor shown not to be: one wrong "good" sends git bisect the wrong
        # way, so measure once more and go by the second measurement (still unclear: skip)
        _log(args.log, replace(entry, said=Said.UNCLEAR, cases=cases))
        result, why = _measure(args, stem + "-again", extra, cwd)
        if result is None:
            _log(args.log, replace(entry, reason=why))
            return SKIP
        verdict, cases = judge(args.good_json, result, args.threshold, args.alpha)
        reason = "measured again" if verdict != SKIP else "measured again: " + _why(cases)
    if verdict == BAD:
        # A/B: a slow session can make every round late; GOOD measured now must agree
        at_first = replace(entry, said=Said.BAD_AT_FIRST, cases=cases, reason="vs GOOD at start")
        _log(args.log, at_first)
        fresh, why = _measure(args, f"good-now-{stem}", extra, args.good_checkout)
        if fresh is None:
            raise BisectError(f"GOOD no longer measures: {why}")
        verdict, cases = judge(fresh, result, args.threshold, args.alpha, args.good_json)
        reason = "vs GOOD measured again now"
    _log(args.log, replace(entry, said=Said.of(verdict), cases=cases, reason=reason))
    return verdict


def _why(cases: list[GateRow]) -> str:
    return "; ".join(f"{c.name}: {c.message}" for c in cases if _unclear([c]))


def _cases_text(cases: list[GateRow]) -> str:
    def one(c: GateRow) -> str:
        if c.change_percent is None:
            return f"{c.name} ({c.verdict})"
        p_value = "?" if c.p_value is None else f"{c.p_value:.2g}"
        return f"{c.name} {c.change_percent:+.1f} % (p={p_value}, {c.verdict})"

    return "; ".join(one(c) for c in cases)


def read_log(log: Path) -> list[StepRow]:
    """The steps logged so far (RowsError, one line, for a line this perfgate cannot read)."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    return [step_row(json.loads(line)) for line in lines if line.strip()]


def log_table(log: Path) -> str:
    """The steps so far as a table: commit, subject, verdict, measured change vs GOOD."""
    steps = read_log(log)
    if not steps:
        return "no step was measured\n"
    rows = [
        [s.commit[:10], s.subject[:40], s.said.value, _cases_text(s.cases), s.reason] for s in steps
    ]
    headers = ["commit", "subject", "verdict", "change vs GOOD", "note"]
    return render(headers, rows, False) + "\n"


def regression_of(log: Path, commit: str) -> str:
    """What was measured at ``commit`` (the first bad one), from the log."""
    for step in reversed(read_log(log)):
        if step.commit == commit and step.cases:
            return "  measured there vs GOOD: " + _cases_text(step.cases)
    return "  (no measurement of it in the log)"
