"""The nightly: first the stored comparison (``pytest TESTS --perf-gate``: the tier against this
GPU's newest baseline, with one pytest-xdist worker per GPU where it has several); then every
case it cannot settle (``verdict.nightly.ab_reason``) goes to an A/B (``compare``) between the
baseline's commit and the tree under test, on the same GPUs, at the target. Only a case the A/B
finds slower fails the night; the night's verdicts are ``verdict.nightly``'s.

Every input is checked before any work (gate.json rows, an A that is the tree under test, an
unfinished A/B's journal). An A/B that is interrupted or reaches the time limit writes what it
decided and which cases remain; ``resume`` continues it (the stored comparison is not run again).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfgate import parts, store
from perfgate.ab import AbError, children, journal, trees
from perfgate.ab.compare import AbOptions, AbRun, as_json, run_ab
from perfgate.ab.exits import verdict_status
from perfgate.ab.order import ratio_groups
from perfgate.benchmark import Run
from perfgate.format import terminal
from perfgate.outputs import disk_problem, write_whole
from perfgate.report.nightly import markdown
from perfgate.store import lineage
from perfgate.verdict import nightly as policy
from perfgate.verdict import rows as gate_rows
from perfgate.verdict.thresholds import Thresholds

RESULTS = Path("perfgate-results")
SCREEN = 0.01  # a gated case slower than this in the stored comparison goes to the A/B
TARGET = 0.03  # the A/B's threshold: a 3 % slowdown fails the night
# extra block pairs for the cases the first ones leave undecided and more pairs can decide: with
# the night's cases tested together, 3 + 7 pairs catch a 3.5 % slowdown of a kernel whose blocks
# scatter by 0.5 % 19 times in 20, 4 % every time (docs/gate-validation/verdict-rule/)
MORE_BLOCKS = 7


@dataclass
class NightlyOptions:
    results: Path = RESULTS
    confirm_only: bool = False  # the stored comparison ran already: read results/gate.json
    resume: bool = False  # continue an A/B from its journal (no stored comparison either)
    base_ref: str | None = None  # default: the baseline's commit (its commit_info)
    baseline: str | None = None  # the baseline run whose commit A is (default: the gate's)
    # the baseline run: (RUN given or None, the stored comparison's hardware key) -> Run
    find_baseline: Callable[[str | None, str | None], Run] | None = None
    screen: float = SCREEN
    target: float = TARGET
    blocks: int = 3  # 3-5 % caught in 22 of 22 with 3 (docs/gate-validation/h100-session7/)
    more_blocks: int = MORE_BLOCKS  # extra block pairs for the cases the first ones left undecided
    pytest_args: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    gpus: list[str | None] = field(default_factory=lambda: [None])
    deadline: float | None = None
    undecided: str = "warn"  # an undecided case: warn (listed first) or fail the night
    command: str = "nightly"  # the command the user ran (nightly or check), named in what it says

    @property
    def journal(self) -> Path:
        return self.results / "ab-blocks"


def stored_comparison_command(options: NightlyOptions) -> list[str]:
    """The pytest arguments of the stored comparison: gate.md/.json, nightly.json, junit.xml;
    ``-n`` one worker per GPU where the night has several GPUs and no ``-n`` of its own."""
    results, args = options.results, list(options.pytest_args)
    workers = []
    if len(options.gpus) > 1 and not any(a in ("-n", "--numprocesses") or a.startswith(
            ("-n", "--numprocesses=")) for a in args):  # fmt: skip
        workers = ["-n", str(len(options.gpus))]
    return [*options.tests, "--perf-gate", f"--perf-gate-report={results / 'gate.md'}",
            f"--benchmark-json={results / 'nightly.json'}", f"--junitxml={results / 'junit.xml'}",
            *workers, *args]  # fmt: skip


def failing_tests(junit: Path) -> int:
    """Failures and errors pytest reported in its junit XML (0 when it wrote none)."""
    if not junit.is_file():
        return 0
    root = ElementTree.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)


def junit_name(node_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's junit XML gives the case ``node_id``: its path dotted
    without ``.py``, its classes, then the test and its parameters."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def case_seconds(junit: Path, names: list[str]) -> dict[str, float]:
    """Seconds each of ``names`` took in the stored comparison, as its junit XML says (setup,
    warm-up, compile, rounds and teardown: what one block of it costs); none without the
    file."""
    if not junit.is_file():
        return {}
    try:
        root = ElementTree.parse(junit).getroot()
    except ElementTree.ParseError:
        return {}
    took = {(case.get("classname", ""), case.get("name", "")): case.get("time", "")
            for case in root.iter("testcase")}  # fmt: skip
    found = {}
    for name in names:
        try:
            found[name] = max(float(took[junit_name(name)]), 0.0)
        except (KeyError, ValueError):
            continue
    return found


def read_verdicts(path: Path, parse: Callable, missing: AbError, what: str):
    """``parse`` of the JSON in ``path``: ``missing`` when there is none, an AbError saying it is
    not ``what`` when it cannot be read."""
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise missing from None
    except (ValueError, UnicodeDecodeError) as error:  # RowsError is a ValueError
        raise AbError(f"{path} is not {what} ({error})") from None


def read_gate(results: Path) -> list[gate_rows.GateRow]:
    path = results / "gate.json"
    missing = AbError(f"{path} is missing: run the stored comparison first (without "
                      "--confirm-only or --resume)")  # fmt: skip
    return read_verdicts(path, gate_rows.from_json, missing, "the gate's JSON: run the gate again")


def shard_of(pytest_args: list[str]) -> str | None:
    """``I/N`` of a ``--perf-shard I/N`` among the stored comparison's arguments."""
    for index, arg in enumerate(pytest_args):
        text = arg.partition("=")[2] if arg.startswith("--perf-shard=") else None
        if arg == "--perf-shard" and index + 1 < len(pytest_args):
            text = pytest_args[index + 1]
        if text is not None:
            try:
                number, count = parts.parse(text)
            except ValueError as error:
                raise AbError(str(error)) from None
            return f"{number}/{count}"
    return None


def check_before_work(options: NightlyOptions, root: Path) -> list[gate_rows.GateRow] | None:
    """What can be refused before anything runs: a --base-ref that is the tree under test, an
    unfinished A/B (without --resume), a shard that names no part, several GPUs without
    pytest-xdist, and gate.json when it is read rather than made. Its rows when read."""
    rows = read_gate(options.results) if options.confirm_only or options.resume else None
    if options.base_ref:
        commit = trees.resolve_commit(root, options.base_ref, "--base-ref")
        trees.refuse_the_tree_under_test(root, commit, options.base_ref)
    journal.check_start(options.journal, options.resume)
    shard_of(options.pytest_args)
    if "-n" in stored_comparison_command(options) and not importlib.util.find_spec("xdist"):
        raise AbError(f"{len(options.gpus)} GPUs: the stored comparison runs one pytest-xdist "
                      "worker per GPU: pip install pytest-xdist, or give --gpus 1")  # fmt: skip
    return rows


def base_commit(options: NightlyOptions, root: Path) -> str:
    """The commit A is built from: --base-ref, else the baseline run's commit_info."""
    if options.base_ref:
        return trees.resolve_commit(root, options.base_ref, "--base-ref")
    key = None if options.baseline else store.load(options.results / "nightly.json").recorded_key
    run = options.find_baseline(options.baseline, key)
    commit = (run.commit_info or {}).get("id")
    if not commit:
        raise AbError(f"the baseline {run.path} records no commit; give --base-ref REF")
    try:  # the baseline's own code may be the tree's: an honest A/A, no --base-ref HEAD
        return trees.resolve_commit(root, commit, "the baseline's commit")
    except AbError:
        raise AbError(missing_commit(commit, run.path, root)) from None


def missing_commit(commit: str, run_file: Path | None, root: Path) -> str:
    """One line for a baseline whose commit this checkout lacks: what is true (not in this
    repository's history; a shallow clone only where it is one), the note kept beside the run,
    and how to go on."""
    name = f" ({run_file.name})" if run_file is not None else ""
    note = lineage.note_of(run_file)
    noted = f"; its note: {terminal(note)}" if note else ""
    return (f"the baseline's commit {commit[:12]}{name} is {lineage.NOT_IN_HISTORY}"
            f"{lineage.shallow_note(root)}{noted}; give --base-ref REF (a commit on the main "
            "line with the baseline's code), or promote a baseline run of a commit on the main "
            "line")  # fmt: skip


def run_nightly(options: NightlyOptions, out, err) -> int:
    """The night; its exit status (AbError and StoreError: one line, exit 2)."""
    root = trees.repository_root(Path.cwd())
    rows = check_before_work(options, root)
    options.results.mkdir(parents=True, exist_ok=True)
    if rows is None:
        command = stored_comparison_command(options)
        print("stored comparison: " + shlex.join(["pytest", *command]), file=err, flush=True)
        status = children.run_pytest(command, options.gpus)
        if status not in (0, 1):
            print(f"perfgate {options.command}: the stored comparison exited {status} (see its "
                  "output above); nothing was confirmed", file=err)  # fmt: skip
            return status
        rows = read_gate(options.results)
    screen, target = options.screen, options.target
    reasons = {r.name: w for r in rows if (w := policy.ab_reason(r, screen, target))}
    ab = AbRun("", [])
    if reasons:
        wanted = ab_options(options, base_commit(options, root), list(reasons))
        ab = run_ab(wanted, err)
        text = json.dumps(as_json(ab, wanted), indent=2, allow_nan=False) + "\n"
        _write(options.results / "ab.json", text)
    night = policy.Night(
        policy.decide(rows, reasons, {r.name: r for r in ab.results}), ab.commit,
        options.blocks, options.target, options.screen,
        failing_tests(options.results / "junit.xml"), ab.stopped, tuple(ab.remaining),
        shard_of(options.pytest_args), options.undecided,
        policy.offset_note(policy.host_offset(rows), options.screen),
    )  # fmt: skip
    write(night, options.results, options.command)
    print(markdown(night, options.command), file=out)
    return verdict_status(night, options.results / "gate.json", err, options.command)


def ab_options(options: NightlyOptions, commit: str, names: list[str]) -> AbOptions:
    """The A/B of the flagged ``names``, balanced over the GPUs by the seconds each took in the
    stored comparison (a block's cost, not only its timed rounds), ratio partners together."""
    stored = store.load(options.results / "nightly.json") if (
        options.results / "nightly.json").is_file() else None  # fmt: skip
    return AbOptions(
        commit, list(options.tests), options.blocks, options.more_blocks, None,
        options.pytest_args, Thresholds(default=options.target), options.results,
        options.journal, options.gpus, options.resume, options.deadline, names,
        case_seconds(options.results / "junit.xml", names),
        ratio_groups(stored, names) if stored else None,
        same_allowed=True,  # --base-ref was checked before any work; the baseline's may be B
    )  # fmt: skip


def write(night: policy.Night, results: Path, command: str = "nightly") -> None:
    _write(results / "nightly.md", markdown(night, command) + "\n")
    _write(results / "nightly-verdicts.json", json.dumps(policy.as_json(night), indent=2) + "\n")
    # the gate's rows with the night's verdicts, for perfgate dashboard --gate
    gate = gate_rows.as_json([n.row for n in night.rows])
    _write(results / "nightly-gate.json", json.dumps(gate, indent=2) + "\n")


def _write(path: Path, text: str) -> None:
    """``path`` written whole or not at all; a full disk is one line (AbError), not a failed
    night."""
    try:
        write_whole(path, text)
    except OSError as error:
        raise AbError(
            f"{disk_problem(error, path.name)}; free some space and run it again"
        ) from None
