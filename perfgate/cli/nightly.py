"""``perfgate nightly``: the nightly GPU gate. First the stored comparison (``pytest perf_tests
--perf-gate``, the full tier against this GPU's newest baseline); then every case it cannot
settle is judged by an interleaved A/B (``perfgate ab``'s machinery) between the baseline's
commit and the tree under test, on the same GPU, at ``--target`` (3 %). Only a case the A/B
finds slower fails the night; the report says, per case, which comparison decided.

A host-bound case is gated on its exact launch counts by the stored comparison (the A/B cannot
see 3 % in a time that follows host jitter); a count that grew fails the night without an A/B.
Every other case goes to the A/B when the stored comparison flagged it (regression or
unconfirmed), could not gate it (a run-time choice, too few rounds, too noisy), saw it
power-limited (its stored comparison drifts with the clock between sessions), saw it slower than
``--screen``, or gated it at a threshold looser than the target (other than a test's own marker).

Exit status: 0 the night passes, 1 an A/B-confirmed regression or a failing test, 2 an error (one
line), pytest's own status when the stored comparison could not run (4 usage, 6 gate could not
run), 6 when the night gated no case, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfgate.cli import ab
from perfgate.cli.guard import CommandError
from perfgate.cli.nightly_report import markdown
from perfgate.verdict import nightly as policy
from perfgate.verdict import rows as gate_rows
from perfgate.verdict.nightly import NightRow, ab_reason
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.thresholds import Thresholds

RESULTS = Path("perfgate-results")
GATED_NOTHING = 6  # as the gate's exit status when it gated nothing
SCREEN = 0.01  # a gated case slower than this in the stored comparison goes to the A/B
TARGET = 0.03  # the A/B's threshold: a 3 % slowdown fails the night


@dataclass
class NightlyOptions:
    results: Path = RESULTS
    confirm_only: bool = False  # the stored comparison ran already: read results/gate.json
    base_ref: str | None = None  # default: the baseline's commit (its commit_info)
    baseline: Path | None = None  # the baseline run whose commit A is (default: the gate's)
    screen: float = SCREEN
    target: float = TARGET
    blocks: int = 3  # 3-5 % caught in 22 of 22 with 3 (docs/gate-validation/h100-session7/)
    pytest_args: list[str] = field(default_factory=list)
    more_blocks: int = 3  # extra block pairs for the cases the first blocks left undecided


def stored_comparison_command(options: NightlyOptions) -> list[str]:
    """``pytest perf_tests --perf-gate`` writing gate.md/.json, nightly.json and junit.xml."""
    results = options.results
    return [sys.executable, "-m", "pytest", "perf_tests", "--perf-gate",
            f"--perf-gate-report={results / 'gate.md'}",
            f"--benchmark-json={results / 'nightly.json'}",
            f"--junitxml={results / 'junit.xml'}", *options.pytest_args]  # fmt: skip


def run_stored_comparison(options: NightlyOptions, err) -> int:
    command = stored_comparison_command(options)
    print("stored comparison: " + " ".join(command[1:]), file=err, flush=True)
    environment = {k: v for k, v in os.environ.items() if k not in ab.XDIST_VARIABLES}
    return subprocess.run(command, env=environment).returncode  # not an xdist worker's session


def failing_tests(junit: Path) -> int:
    """Failures and errors pytest reported in its junit XML (0 when it wrote none)."""
    if not junit.is_file():
        return 0
    root = ElementTree.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)


def read_gate(results: Path) -> list[gate_rows.GateRow]:
    path = results / "gate.json"
    try:
        return gate_rows.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CommandError(f"{path} is missing: run the stored comparison first (without "
                           "--confirm-only)") from None  # fmt: skip
    except (ValueError, UnicodeDecodeError) as error:  # RowsError is a ValueError
        raise CommandError(f"{path} is not the gate's JSON ({error}); run the gate again") from None


def base_commit(options: NightlyOptions, root: Path) -> str:
    """The commit A is built from: --base-ref, else the baseline run's commit_info."""
    if options.base_ref:
        return ab.resolve_commit(root, options.base_ref)
    from perfgate.cli.runs import Hardware

    run = Hardware(None, None).resolve(str(options.baseline)) if options.baseline else None
    if run is None:
        run = _gate_baseline(options.results)
    commit = (run.commit_info or {}).get("id")
    if not commit:
        raise CommandError(f"the baseline {run.path} records no commit; give --base-ref REF")
    try:
        return ab.resolve_commit(root, commit)
    except ab.AbError:
        raise CommandError(
            f"the baseline's commit {commit[:12]} is not in {root} (a shallow clone? check out "
            "with full history), or give --base-ref REF"
        ) from None


def _gate_baseline(results: Path):
    """The newest run of the hardware key the stored comparison ran on (the gate's baseline)."""
    from perfgate import store
    from perfgate.cli.runs import Hardware

    current = store.load(results / "nightly.json")
    hardware = Hardware(None, current.recorded_key)
    return hardware.newest(1)[0]


def _selection(names) -> str:
    return " or ".join(sorted({name.split("::")[-1] for name in names}))


def undecided(results) -> list[str]:
    """Cases the A/B compared but could not decide (a slowdown past the target that is not yet
    significant, block pairs that disagree): more block pairs may decide them."""
    return [r.name for r in results if r.verdict is Verdict.NOT_GATED and r.comparison]


def confirm(names: list[str], commit: str, options: NightlyOptions, err) -> dict:
    """name -> AbResult of an interleaved A/B of ``names`` between ``commit`` and this tree;
    the cases it leaves undecided run ``options.more_blocks`` more block pairs, alone."""
    ab_options = ab.AbOptions(commit, _selection(names), options.blocks, None,
                              options.pytest_args, Thresholds(default=options.target),
                              options.results / "ab.json")  # fmt: skip
    root = ab.repository_root(Path.cwd())
    with ab.base_worktree(root, commit) as base:
        trees = {"A": base, "B": root}
        runs = ab.run_blocks(trees, ab_options, err)
        results = ab.judge_pairs(runs, ab_options)
        if (again := undecided(results)) and options.more_blocks:
            print(f"{len(again)} undecided: {options.more_blocks} more blocks", file=err)
            more = replace(ab_options, expression=_selection(again), blocks=options.more_blocks)
            extra = ab.run_blocks(trees, more, err)
            runs = {label: runs[label] + extra[label] for label in runs}
    results = ab.judge_pairs(runs, ab_options)
    ab_options.out.write_text(json.dumps(ab.as_json(results, ab_options, commit), indent=2))
    return {result.name: result for result in results}


def run_nightly(options: NightlyOptions, out, err) -> int:
    options.results.mkdir(parents=True, exist_ok=True)
    failed = 0
    if not options.confirm_only:
        status = run_stored_comparison(options, err)
        if status not in (0, 1):
            print(f"perfgate nightly: the stored comparison exited {status} (see its output "
                  "above); nothing was confirmed", file=err)  # fmt: skip
            return status
        failed = failing_tests(options.results / "junit.xml")
    rows = read_gate(options.results)
    reasons = {r.name: why for r in rows if (why := ab_reason(r, options.screen, options.target))}
    verdicts = {}
    commit = ""
    if reasons:
        root = ab.repository_root(Path.cwd())
        commit = base_commit(options, root)
        print(f"A/B of {len(reasons)} cases against {commit[:12]}", file=err, flush=True)
        try:
            verdicts = confirm(list(reasons), commit, options, err)
        except KeyboardInterrupt:
            print("perfgate nightly: interrupted; the base worktree was removed", file=err)
            return 130
    night = policy.decide(rows, reasons, verdicts)
    write(night, options, commit, failed)
    print(markdown(night, commit, options.blocks, options.target, failed), file=out)
    if failed or policy.failed(night):
        return 1
    if policy.gated_nothing(night):
        print(f"perfgate nightly: the night gated no case ({len(night)} in "
              f"{options.results / 'gate.json'}); it cannot pass: check the stored "
              "comparison's selection and its baseline", file=err)  # fmt: skip
        return GATED_NOTHING
    return 0


def write(night: list[NightRow], options: NightlyOptions, commit: str, failed: int) -> None:
    report = markdown(night, commit, options.blocks, options.target, failed)
    (options.results / "nightly.md").write_text(report + "\n", encoding="utf-8")
    cases = [{**n.row.as_json(), "decided_by": n.decided_by, "stored": n.stored, "ab": n.ab,
              "why_ab": n.why_ab} for n in night]  # fmt: skip
    data = {"base_commit": commit, "blocks": options.blocks, "target": options.target,
            "screen": options.screen, "failing_tests": failed, "cases": cases}  # fmt: skip
    (options.results / "nightly-verdicts.json").write_text(json.dumps(data, indent=2) + "\n")
    # the gate's rows with the night's verdicts, for perfgate dashboard --gate
    gate = gate_rows.as_json([n.row for n in night])
    (options.results / "nightly-gate.json").write_text(json.dumps(gate, indent=2) + "\n")


def add_parser(commands, fraction) -> None:
    nightly = commands.add_parser(
        "nightly",
        help="the nightly gate: stored comparison, then an A/B of what it cannot settle",
        description=__doc__.split("\n\n")[0],
    )
    nightly.usage = ("perfgate nightly [-h] [--results DIR] [--confirm-only] [--base-ref REF] "
                     "[--baseline RUN] [--screen FRACTION] [--target FRACTION] [--blocks B] "
                     "[--more-blocks M] [-- PYTEST_ARG ...]")  # fmt: skip
    nightly.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                         help="folder for gate.*, nightly.json, ab.json, nightly.md")  # fmt: skip
    nightly.add_argument("--confirm-only", action="store_true",
                         help="skip the stored comparison; read DIR/gate.json")  # fmt: skip
    nightly.add_argument("--base-ref", metavar="REF", help="A's commit (default: the baseline's)")
    nightly.add_argument("--baseline", type=Path, metavar="RUN", help="baseline run file")
    nightly.add_argument("--screen", type=fraction, default=SCREEN, metavar="FRACTION",
                         help="stored change that sends a gated case to the A/B (1%%)")  # fmt: skip
    nightly.add_argument("--target", type=fraction, default=TARGET, metavar="FRACTION",
                         help="the A/B's threshold (3%%)")  # fmt: skip
    nightly.add_argument("--blocks", type=int, default=3, metavar="B",
                         help="A/B blocks per tree (default: %(default)s)")  # fmt: skip
    nightly.add_argument("--more-blocks", type=int, default=3, metavar="M",
                         help="more blocks per tree for the cases left undecided "
                              "(default: %(default)s)")  # fmt: skip


def options_from(args, pytest_args: list[str]) -> NightlyOptions:
    if args.blocks < 2:
        raise CommandError(f"--blocks {args.blocks}: at least 2 (3 or more for significance)")
    if args.more_blocks < 0:
        raise CommandError(f"--more-blocks {args.more_blocks}: 0 or more")
    return NightlyOptions(args.results, args.confirm_only, args.base_ref, args.baseline,
                          args.screen, args.target, args.blocks,
                          pytest_args, args.more_blocks)  # fmt: skip
