"""One step of ``perfgate bisect``: measure the case at the checked-out commit, judge it against
GOOD's measurement, log the step, and answer ``git bisect run`` (0 good, 1 bad, 125 skip, 128
abort the bisection)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from perfgate.ab.children import git
from perfgate.arguments import add_alpha, add_fraction, add_test_paths
from perfgate.cli import children
from perfgate.cli.guard import CommandError
from perfgate.cli.history_runs import load
from perfgate.report.tables import render
from perfgate.verdict.evidence import evidence
from perfgate.verdict.judge import judge_all
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.thresholds import DEFAULT_ALPHA, Thresholds

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
SLOWER = (str(Verdict.REGRESSION), str(Verdict.UNCONFIRMED))  # a bad commit, in the gate's words


class BisectError(CommandError):
    """A bisection that cannot go on; the message says what to do."""


def add_step_arguments(addoption) -> None:
    """What ``perfgate bisect`` and each of its steps take alike, declared once: the case, its
    test paths, the threshold and the significance level (passed on as the user wrote them)."""
    addoption("-k", dest="case", required=True, metavar="CASE", help="pytest -k")
    add_test_paths(addoption)
    add_fraction(addoption, "--threshold", None, "smallest slowdown called bad",
                 "the test's marker, else from GOOD's measured noise, else 10%%")  # fmt: skip
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
    command = children.pytest(*(args.tests or ()), "-k", args.case, "-q", "-p", "no:cacheprovider",
                              "--benchmark-enable", f"--benchmark-json={result}",
                              *extra)  # fmt: skip
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
) -> tuple[int, list]:
    """(GOOD/BAD/SKIP, one dict per case measured on both sides) for a measurement, decided by
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
    cases = []
    for result in judge_all(both, thresholds):
        c = result.comparison
        cases.append(
            {
                "name": both[result.name].now.name,
                "change_percent": c.change_percent if c else None,
                "p_value": c.p_value if c else None,
                "threshold": result.threshold,
                "threshold_source": result.threshold_source,
                "verdict": str(result.verdict),
                "reason": str(result.reason) if result.reason else None,
                "message": result.message,
            }
        )
    if any(c["verdict"] in SLOWER for c in cases):
        return BAD, cases
    return (SKIP if not cases or _unclear(cases) else GOOD), cases


def _unclear(cases: list) -> bool:
    return any(Verdict(c["verdict"]) in (Verdict.NOT_GATED, Verdict.UNDECIDED) for c in cases)


def _log(path: Path, entry: dict) -> None:
    with path.open("a") as stream:
        stream.write(json.dumps(entry) + "\n")


def step_main(argv: list[str], cwd: Path | None = None) -> int:
    """Measure and judge the commit checked out in ``cwd`` (default: the working directory)."""
    cwd = cwd or Path.cwd()
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = _parser().parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    try:
        commit = git(cwd, "rev-parse", "HEAD")
        entry = {"commit": commit, "subject": git(cwd, "log", "-1", "--format=%s")}
        stem = "good" if args.measure_good else commit[:12]
        result, why = _measure(args, stem, extra, cwd)
        if result is None:
            _log(args.log, {**entry, "verdict": "skip", "reason": why})
            return SKIP
        if args.measure_good:
            _log(args.log, {**entry, "verdict": "GOOD (reference)", "reason": ""})
            return GOOD
        return _judge_step(args, entry, result, extra, cwd)
    except Exception as error:  # any failure of the step itself must stop the bisection
        print(f"perfgate bisect step: {type(error).__name__}: {error}", file=sys.stderr)
        return ABORT


def _judge_step(args, entry: dict, result: Path, extra: list[str], cwd: Path) -> int:
    """GOOD/BAD/SKIP for a measurement, measuring again where one look can mislead."""
    stem = entry["commit"][:12]
    verdict, cases = judge(args.good_json, result, args.threshold, args.alpha)
    reason = "" if cases else "no case in common with GOOD"
    if cases and _unclear(cases):
        # neither slower nor shown not to be: one wrong "good" sends git bisect the wrong
        # way, so measure once more and go by the second measurement (still unclear: skip)
        _log(args.log, {**entry, "verdict": "unclear", "cases": cases, "reason": ""})
        result, why = _measure(args, stem + "-again", extra, cwd)
        if result is None:
            _log(args.log, {**entry, "verdict": "skip", "reason": why})
            return SKIP
        verdict, cases = judge(args.good_json, result, args.threshold, args.alpha)
        reason = "measured again" if verdict != SKIP else "measured again: " + _why(cases)
    if verdict == BAD:
        # A/B: a slow session can make every round late; GOOD measured now must agree
        _log(args.log, {**entry, "verdict": "bad?", "cases": cases, "reason": "vs GOOD at start"})
        fresh, why = _measure(args, f"good-now-{stem}", extra, args.good_checkout)
        if fresh is None:
            raise BisectError(f"GOOD no longer measures: {why}")
        verdict, cases = judge(fresh, result, args.threshold, args.alpha, args.good_json)
        reason = "vs GOOD measured again now"
    words = {GOOD: "good", BAD: "bad", SKIP: "skip"}
    _log(args.log, {**entry, "verdict": words[verdict], "cases": cases, "reason": reason})
    return verdict


def _why(cases: list) -> str:
    return "; ".join(f"{c['name']}: {c['message']}" for c in cases if _unclear([c]))


def _cases_text(cases: list) -> str:
    def one(c: dict) -> str:
        if c.get("change_percent") is None:
            return f"{c['name']} ({c.get('verdict', '?')})"
        change = f"{c['change_percent']:+.1f} % (p={c['p_value']:.2g}"
        return f"{c['name']} {change}, {c.get('verdict', '?')})"

    return "; ".join(one(c) for c in cases)


def log_table(log: Path) -> str:
    """The steps so far as a table: commit, subject, verdict, measured change vs GOOD."""
    if not log.is_file():
        return "no step was measured\n"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    rows = [
        [e["commit"][:10], e["subject"][:40], e["verdict"], _cases_text(e.get("cases", [])),
         e.get("reason", "")]
        for e in entries
    ]  # fmt: skip
    headers = ["commit", "subject", "verdict", "change vs GOOD", "note"]
    return render(headers, rows, False) + "\n"


def regression_of(log: Path, commit: str) -> str:
    """What was measured at ``commit`` (the first bad one), from the log."""
    for line in reversed(log.read_text().splitlines()):
        entry = json.loads(line)
        if entry["commit"] == commit and entry.get("cases"):
            return "  measured there vs GOOD: " + _cases_text(entry["cases"])
    return "  (no measurement of it in the log)"
