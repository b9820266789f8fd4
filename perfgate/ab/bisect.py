"""The bisection behind ``perfgate bisect GOOD BAD -k CASE``: the first commit that made a
benchmark slower.

Everything happens in a temporary ``git worktree``, so the user's checkout, branch and
uncommitted files are never touched. GOOD and BAD are measured first (pytest with
``--benchmark-json``); unless BAD is a regression of GOOD as the gate decides it
(``verdict.outcome.decide``: the gate's rules and words, at the gate's threshold for the case: a
marker, ``--threshold``, else from GOOD's measured noise, never below the device floor) there is
nothing to bisect. Then ``git bisect run`` calls ``step_main`` at each commit: 0 good, 1 bad,
125 skip (the case did not run, pytest failed, or it is not gated: its rounds could not decide).
The steps are logged as JSON lines (``verdict.bisect.StepRow``, versioned) and shown as a table
with the first bad commit, each case with its verdict in the gate's words. On an error, Ctrl-C or
SIGTERM, ``git bisect run`` and its steps (their whole process group) are stopped first, then the
worktree and the bisect state removed: nothing of the bisection runs or writes after the command
exits.

Exit status: 0 first bad commit named; 1 BAD is not slower than GOOD; 2 usage, git or
measurement error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from perfgate.ab import children
from perfgate.ab.bisect_steps import SKIP, BisectError, log_table, regression_of, step_main
from perfgate.ab.children import git, git_succeeds
from perfgate.progress import Progress

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# git bisect run calls this with the perfgate that started the bisection (not the checkout's):
# the folder that holds this perfgate package goes first on the step's path
STEP_CODE = (
    f"import sys; sys.path.insert(0, {str(PACKAGE_ROOT)!r}); "
    "from perfgate.ab.bisect_steps import step_main; sys.exit(step_main(sys.argv[1:]))"
)


def _commit(revision: str, repo: Path) -> str:
    commit = children.commit_of(repo, revision)
    if commit is None:
        raise BisectError(f"'{revision}' is not a commit of {repo} (check `git log`)")
    return commit


def _prepare(args, repo: Path) -> tuple[str, str, Path]:
    good, bad = _commit(args.good, repo), _commit(args.bad, repo)
    if good == bad:
        raise BisectError("GOOD and BAD are the same commit; name an older GOOD")
    if not git_succeeds(repo, "merge-base", "--is-ancestor", good, bad):
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
    children.add_worktree(repo, good_checkout, good)
    children.add_worktree(repo, checkout, bad)
    options = [
        "--good-json",
        str(folder / "good.json"),
        "--log",
        str(log),
        "-k",
        args.case,
        "--alpha",
        str(args.alpha),
        "--good-checkout",
        str(good_checkout),
    ]
    if args.tests:
        options += ["--tests", *args.tests]
    if args.threshold is not None:
        options += ["--threshold", args.threshold.text]  # as written: the step reads it alike
    print(f"measuring GOOD {good[:10]} in {good_checkout}...", file=err, flush=True)
    if step_main(options + ["--measure-good", "--", *extra], good_checkout) != 0:
        raise BisectError(f"the case did not run at GOOD {args.good}; see {folder}/good.log")
    print(f"measuring BAD {bad[:10]}...", file=err, flush=True)
    if (found := step_main(options + ["--", *extra], checkout)) != 1:
        out.write(log_table(log))
        why = "cannot be shown slower than" if found == SKIP else "is not slower than"
        out.write(f"BAD {args.bad} {why} GOOD {args.good} (see the table): nothing to bisect\n")
        return 1
    git(checkout, "bisect", "start", bad, good)
    step = [sys.executable, "-c", STEP_CODE, *options, "--in-bisect-run", "--", *extra]
    commits = int(git(repo, "rev-list", "--count", f"{good}..{bad}"))
    transcript = _bisect_run(step, checkout, commits, err)
    (folder / "git-bisect.log").write_text(transcript)
    out.write(log_table(log))
    if "is the first bad commit" not in transcript:
        raise BisectError(f"git bisect named no single commit; see {folder}/git-bisect.log")
    first = git(checkout, "rev-parse", "refs/bisect/bad")
    subject = git(checkout, "log", "-1", "--format=%h %s", first)
    out.write(f"\nfirst bad commit: {first}\n  {subject}\n")
    out.write(regression_of(log, first) + f"\nlog: {log}\n")
    return 0


def _bisect_run(step: list[str], checkout: Path, commits: int, err) -> str:
    """``git bisect run STEP``'s output, with progress after each step it reports (about log2
    of the ``commits`` between GOOD and BAD)."""
    steps = max(1, math.ceil(math.log2(max(commits, 2))))
    with Progress(steps, "bisect steps", err) as progress:

        def reported(line: str) -> None:
            if line.startswith("Bisecting:") or "is the first bad commit" in line:
                progress.grow(max(0, progress.done + 1 - progress.total))
                progress.step(line.strip()[:100])

        return children.git_transcript(checkout, "bisect", "run", *step, on_line=reported)


def run_bisect(args: argparse.Namespace, extra: list[str], out, err) -> int:
    """Run the bisection; returns the exit status (see the module docstring). Ctrl-C and SIGTERM
    go on as KeyboardInterrupt (the command line says so in one line, exit 130) once every child
    is stopped and the worktrees are removed: nothing writes to ``--out`` afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="perfgate-bisect-"))
    repo = None
    try:
        repo = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
        return _bisect(args, extra, repo, scratch, out, err)
    finally:  # git bisect run and its steps were stopped first (children.session)
        for checkout in (scratch / "checkout", scratch / "good"):
            if repo is not None and checkout.exists():
                _remove_worktree(repo, checkout, err)
        shutil.rmtree(scratch, ignore_errors=True)


def _remove_worktree(repo: Path, checkout: Path, err) -> None:
    git_succeeds(checkout, "bisect", "reset")
    if not children.remove_worktree(repo, checkout):
        print(
            f"perfgate bisect: could not remove the worktree {checkout}; run "
            "`git worktree prune` once it is gone",
            file=err,
        )
