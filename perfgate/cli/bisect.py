"""``perfgate bisect GOOD BAD -k CASE``: the first commit that made a benchmark slower.

Everything happens in a temporary ``git worktree``, so the user's checkout, branch and
uncommitted files are never touched. GOOD and BAD are measured first (pytest with
``--benchmark-json``); unless BAD is a regression of GOOD as the gate decides it
(``verdict.outcome.decide``: the gate's rules and words, at the gate's threshold for the case: a
marker, ``--threshold``, else from GOOD's measured noise, never below the device floor) there is
nothing to bisect. Then ``git bisect run`` calls ``step_main`` at each commit: 0 good, 1 bad,
125 skip (the case did not run, pytest failed, or it is not gated: its rounds could not decide).
The steps are logged as JSON lines and shown as a table with the first bad commit, each case with
its verdict in the gate's words. The worktree and the bisect state are removed even on an error
or Ctrl-C.

Exit status: 0 first bad commit named; 1 BAD is not slower than GOOD; 2 usage, git or
measurement error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfgate.cli.bisect_steps import (
    SKIP,
    BisectError,
    git,
    log_table,
    regression_of,
    step_main,
)
from perfgate.progress import Progress
from perfgate.verdict.thresholds import DEFAULT_ALPHA, fraction_argument

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# git bisect run calls this with the perfgate that started the bisection (not the checkout's).
STEP_CODE = (
    f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r}); "
    "from perfgate.cli.bisect_steps import step_main; sys.exit(step_main(sys.argv[1:]))"
)


def _fraction(text: str) -> float:
    """``10%`` or ``0.1``, as --perf-gate-threshold takes it; a bare ``10`` is ambiguous."""
    value = fraction_argument(text)
    if not 0 < value < 10:  # a slowdown: above 0 %, and below 1000 %
        raise argparse.ArgumentTypeError(f"{text!r}: a slowdown between 0% and 1000%, e.g. 5%")
    return value


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from error
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a significance level between 0 and 1, e.g. 0.01"
        )
    return value


def add_bisect_parser(commands, formatter) -> None:
    """The ``bisect`` subcommand of the perfgate command line."""
    summary = "find the first commit that made a benchmark slower (git bisect run)"
    parser = commands.add_parser(
        "bisect",
        help=summary,
        description=summary + ". GOOD and BAD are measured first, then `git bisect run` "
        "measures each commit it picks, in a temporary git worktree (your checkout is never "
        "touched): bad = slower than GOOD by the gate's time rule (past the threshold and "
        "significant, or every round slower past it where rounds are too few for a test); a "
        "commit where the case does not run, or that cannot be decided, is skipped. "
        "Exit status: 0 first bad commit named, 1 BAD is not slower than GOOD, "
        "2 error, 130 interrupted.",
        epilog="examples:\n  perfgate bisect v1.0 HEAD -k 'test_dequantize and triton-32'\n"
        "  perfgate bisect abc123 main -k flash-fp16 --threshold 5% -- --device cuda",
        formatter_class=formatter,
    )
    parser.usage = "perfgate bisect [options] GOOD BAD -k CASE [-- PYTEST_ARG ...]"
    parser.add_argument("good", metavar="GOOD", help="a commit where the case was fast")
    parser.add_argument("bad", metavar="BAD", help="a later commit where it is slow")
    parser.add_argument("-k", dest="case", required=True, metavar="CASE", help="pytest -k")
    parser.add_argument("--tests", help="test path (default: the project's, its pytest testpaths)")
    parser.add_argument(
        "--threshold",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="smallest slowdown called bad, 0.1 or 10%% as --perf-gate-threshold takes it "
        "(default: the test's marker, else from GOOD's measured noise, else 10%%)",
    )
    parser.add_argument("--alpha", type=_alpha, default=DEFAULT_ALPHA, help="significance level")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("perfgate-results") / "bisect",
        metavar="DIR",
        help="folder for the step log and measurements (default: %(default)s)",
    )


def _commit(revision: str, repo: Path) -> str:
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], repo)
    except BisectError:
        raise BisectError(f"'{revision}' is not a commit of {repo} (check `git log`)") from None


def _prepare(args, repo: Path) -> tuple[str, str, Path]:
    good, bad = _commit(args.good, repo), _commit(args.bad, repo)
    if good == bad:
        raise BisectError("GOOD and BAD are the same commit; name an older GOOD")
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", good, bad], cwd=repo)
    if ancestor.returncode != 0:
        raise BisectError(f"GOOD {args.good} is not an ancestor of BAD {args.bad}; swap them?")
    return good, bad, _new_folder(args.out / time.strftime("%Y%m%d-%H%M%S"))


def _new_folder(stem: Path) -> Path:
    """``stem``, or ``stem-2``, ``-3``...: two bisections started in one second never share."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        folder = stem if attempt == 1 else stem.with_name(f"{stem.name}-{attempt}")
        try:
            folder.mkdir()
            return folder.resolve()
        except FileExistsError:
            continue
    raise BisectError(f"{stem.parent} has 1000 bisections started in one second")


def _bisect(args, extra, repo: Path, scratch: Path, out, err) -> int:
    good, bad, folder = _prepare(args, repo)
    log, checkout, good_checkout = folder / "steps.jsonl", scratch / "checkout", scratch / "good"
    git(["worktree", "add", "--detach", str(good_checkout), good], repo)
    git(["worktree", "add", "--detach", str(checkout), bad], repo)
    options = [
        "--good-json", str(folder / "good.json"), "--log", str(log),
        "-k", args.case, "--alpha", str(args.alpha), "--good-checkout", str(good_checkout),
    ]  # fmt: skip
    if args.tests:
        options += ["--tests", args.tests]
    if args.threshold is not None:
        options += ["--threshold", f"{args.threshold * 100:.15g}%"]  # 150 % stays 150 %
    print(f"measuring GOOD {good[:10]} in {good_checkout}...", file=err, flush=True)
    if step_main(options + ["--measure-good", "--", *extra], good_checkout) != 0:
        raise BisectError(f"the case did not run at GOOD {args.good}; see {folder}/good.log")
    print(f"measuring BAD {bad[:10]}...", file=err, flush=True)
    if (found := step_main(options + ["--", *extra], checkout)) != 1:
        out.write(log_table(log))
        why = "cannot be shown slower than" if found == SKIP else "is not slower than"
        out.write(f"BAD {args.bad} {why} GOOD {args.good} (see the table): nothing to bisect\n")
        return 1
    git(["bisect", "start", bad, good], checkout)
    command = [sys.executable, "-c", STEP_CODE, *options, "--", *extra]
    commits = int(git(["rev-list", "--count", f"{good}..{bad}"], repo))
    output = _bisect_run(command, checkout, commits, err)
    (folder / "git-bisect.log").write_text(output)
    out.write(log_table(log))
    if "is the first bad commit" not in output:
        raise BisectError(f"git bisect named no single commit; see {folder}/git-bisect.log")
    first = git(["rev-parse", "refs/bisect/bad"], checkout)
    subject = git(["log", "-1", "--format=%h %s", first], checkout)
    out.write(f"\nfirst bad commit: {first}\n  {subject}\n")
    out.write(regression_of(log, first) + f"\nlog: {log}\n")
    return 0


def _bisect_run(command: list[str], checkout: Path, commits: int, err) -> str:
    """``git bisect run COMMAND``'s output, with progress after each step it reports (about
    log2 of the ``commits`` between GOOD and BAD)."""
    steps = max(1, math.ceil(math.log2(max(commits, 2))))
    lines = []
    with Progress(steps, "bisect steps", err) as progress:
        with subprocess.Popen(["git", "bisect", "run", *command], cwd=checkout, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as run:  # fmt: skip
            for line in run.stdout:
                lines.append(line)
                if line.startswith("Bisecting:") or "is the first bad commit" in line:
                    progress.grow(max(0, progress.done + 1 - progress.total))
                    progress.step(line.strip()[:100])
    return "".join(lines)


def run_bisect(args: argparse.Namespace, extra: list[str], out, err) -> int:
    """Run the bisection; returns the exit status (see the module docstring)."""
    scratch = Path(tempfile.mkdtemp(prefix="perfgate-bisect-"))
    repo = None
    try:
        repo = Path(git(["rev-parse", "--show-toplevel"], Path.cwd()))
        return _bisect(args, extra, repo, scratch, out, err)
    except BisectError as error:
        print(f"perfgate bisect: error: {error}", file=err)
        return 2
    except KeyboardInterrupt:
        print("perfgate bisect: interrupted; the repository is left as it was", file=err)
        return 130
    finally:
        for checkout in (scratch / "checkout", scratch / "good"):
            if repo is not None and checkout.exists():
                _remove_worktree(repo, checkout, err)
        shutil.rmtree(scratch, ignore_errors=True)


def _remove_worktree(repo: Path, checkout: Path, err) -> None:
    subprocess.run(["git", "bisect", "reset"], cwd=checkout, capture_output=True)
    removed = subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=repo,
                             capture_output=True)  # fmt: skip
    if removed.returncode != 0:
        print(f"perfgate bisect: could not remove the worktree {checkout}; run "
              "`git worktree prune` once it is gone", file=err)  # fmt: skip
