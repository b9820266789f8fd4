"""``perfgate compare``: the gate's verdict (``verdict.judge``) on two saved runs, as a table.

Run A is the baseline, with its baseline set when A lies in a store folder (as the gate would
take it); run B is the current run. The rules, thresholds (from the command line and from the
declarations saved with each benchmark) and ratio rules are the gate's; only the confirmation
re-run is missing, so a time or ratio failure reads "unconfirmed", as in the gate's first pass.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from perfgate import arguments
from perfgate import format as fmt
from perfgate.benchmark import Run, describe_changes, environment_changes
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import Hardware, add_where, baseline_set_of, kind, matches
from perfgate.format import MISSING, fmt_change, fmt_instructions, fmt_percent, fmt_time
from perfgate.report.tables import render
from perfgate.verdict import summary
from perfgate.verdict.judge import GateResult, Verdict, judge
from perfgate.verdict.thresholds import DEFAULT_ALPHA, Thresholds, parse_thresholds

ENVIRONMENT_KEYS = ("torch", "triton", "cuda", "cudnn", "driver", "python")
# what compare cannot do: a case slower in one pass stays unconfirmed here (exit 0 all the same)
UNCONFIRMED = (
    "unconfirmed: compare cannot re-run a case, so it cannot confirm a regression; the gate "
    "re-ran these, and its verdict is in the gate.json it wrote beside its summary "
    "(perfgate-results/ by default); to confirm them across sessions: perfgate ab"
)


def compare_results(
    a: Run, b: Run, thresholds: Thresholds, patterns: Sequence[str] = ()
) -> tuple[list[Run], list[GateResult]]:
    """(A's baseline set, the verdict on every benchmark of A's set and B matching patterns)."""
    members = baseline_set_of(a)
    _check_threshold_names(thresholds, [*members, b])
    try:
        results = judge(members, b, thresholds)
    except ValueError as error:  # e.g. a threshold marker that is not a fraction
        raise CommandError(f"{a.path} vs {b.path}: {error}") from error
    if patterns:
        results = [r for r in results if matches([r.name, r.name.split("::")[-1]], patterns)]
    if patterns and not results:
        raise CommandError(
            f"no benchmark matches --filter {' '.join(patterns)} in {a.path} or {b.path}; "
            "use a glob or a substring of the benchmark names"
        )
    return members, results


def _check_threshold_names(thresholds: Thresholds, runs: list[Run]) -> None:
    """CommandError when --threshold names a family or test that none of ``runs`` has, as the
    gate refuses an unknown --perf-gate-threshold name (a typo would silently change nothing)."""
    names = {b.test for run in runs for b in run.benchmarks.values()}
    names |= {b.family for run in runs for b in run.benchmarks.values() if b.family}
    if unknown := thresholds.unknown_names(names):
        raise CommandError(
            f"--threshold names no family or test in these runs: {', '.join(unknown)}; "
            f"valid names: {', '.join(sorted(names))}"
        )


def _run_line(side: str, run: Run) -> str:
    tier = run.tier
    facts = [run.date, run.hardware_key] + ([f"tier {tier}"] if tier else [])
    line = f"{side}: {run.path} ({', '.join(facts)})"
    if run.untrusted_reasons:
        line += f"; GPU not trusted: {'; '.join(run.untrusted_reasons)}"
    return line


def environment_line(a: Run, b: Run) -> str:
    changes = environment_changes(a.environment, b.environment)
    if changes:
        return f"environment changed: {describe_changes(changes)}"
    same = [f"{k} {a.environment[k]}" for k in ENVIRONMENT_KEYS if a.environment.get(k)]
    return f"environment: same ({', '.join(same) or 'not recorded'})"


def _cells(result: GateResult) -> list[str]:
    c = result.comparison
    interval = f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]" if c and c.enough_rounds else MISSING
    p_value = MISSING
    if c is not None and c.enough_rounds:
        p_value = f"{c.p_value if c.ratio >= 1 else c.p_value_faster:.2g}"
    before, now, change = MISSING, MISSING, MISSING
    if c is not None:
        before, now = fmt_time(c.baseline_median), fmt_time(c.current_median)
        change = fmt_percent(c.change_percent / 100, signed=True)
    elif result.instructions:  # a counted case: its instructions per call, exact
        before, now = (fmt_instructions(n) for n in result.instructions)
        change, p_value = fmt_change(*result.instructions), "exact"
    return [
        result.name.split("::")[-1],
        before,
        now,
        change,
        p_value,
        interval,
        str(result.verdict),
        # an unchanged time needs no words; an unchanged count has no medians: its message
        "" if result.verdict is Verdict.UNCHANGED and c is not None else result.message,
    ]


def compare_text(
    a: Run, b: Run, thresholds: Thresholds, patterns: Sequence[str], markdown: bool
) -> str:
    """Header lines, the environment difference, one row per benchmark, and the counts; stored
    text escaped for the terminal or for markdown (``perfgate.format``)."""
    members, results = compare_results(a, b, thresholds, patterns)
    headers = ["benchmark", "A median", "B median", "change", "p", "B/A 95% CI", "verdict"]
    cells = [[*_cells(r), summary.threshold_cell(r)] for r in results]
    table = render([*headers, "detail", "threshold"], cells, markdown)
    rule = (
        f"gated as --perf-gate does: slower or faster by more than the case's threshold "
        f"(given, or from its measured noise) with one-sided Mann-Whitney p < "
        f"{thresholds.alpha:g} (adjusted for the cases tested together) and the 95 % bootstrap "
        "interval of B/A excluding 1; unchanged where that interval lies inside +-threshold, "
        "else undecided"
    )
    lines = [_run_line("A", a), _run_line("B", b), environment_line(a, b)]
    if len(members) > 1:
        earlier = ", ".join(run.path.name for run in members[:-1])
        lines.append(f"A is compared as a baseline set with {earlier} (as the gate does)")
    lines = [f"- {fmt.markdown(line)}" if markdown else fmt.terminal(line) for line in lines]
    tail = [f"{summary.counts(results)} ({rule})"]
    if unconfirmed := sum(r.verdict is Verdict.UNCONFIRMED for r in results):
        tail.append(f"{unconfirmed} {UNCONFIRMED}")
    return "\n".join([*lines, "", table, "", *tail, ""])


def compare_json(a: Run, b: Run, thresholds: Thresholds, patterns: Sequence[str]) -> str:
    """The verdict rows as JSON, the same objects the gate writes beside its summary."""
    _, results = compare_results(a, b, thresholds, patterns)
    return json.dumps(summary.as_json(results), indent=2) + "\n"


class Compare(Command):
    name = "compare"
    summary = "compare two runs benchmark by benchmark"
    examples = """\
  perfgate compare                          # the newest two runs of this hardware
  perfgate compare 0003 0004 --filter attn  # runs 3 and 4, attention benchmarks only
  perfgate compare old.json new.json --markdown > compare.md"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "run_a", nargs="?", metavar="RUN_A", help="baseline (default: the 2nd newest run)"
        )
        parser.add_argument(
            "run_b", nargs="?", metavar="RUN_B", help="current (default: the newest run)"
        )
        parser.add_argument(
            "--filter",
            action="append",
            default=[],
            metavar="PATTERN",
            help="glob or substring of the benchmark name (repeatable)",
        )
        parser.add_argument("--markdown", action="store_true", help="print GitHub markdown")
        parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
        arguments.add_thresholds(
            parser.add_argument,
            "--threshold",
            "what a test declared, else from each case's measured noise",
        )
        arguments.add_alpha(parser.add_argument, DEFAULT_ALPHA)
        add_where(parser)

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        hardware = Hardware(args.baselines, args.hardware)
        explicit = [a for a in (args.run_a, args.run_b) if a]
        print("reading runs...", file=err, flush=True)
        # timed and counted runs share pytest-benchmark's own folder: the runs picked are of
        # one kind, as the gate's baseline is (RUN_A's kind, else the newest run's)
        if len(explicit) == 1:
            a = hardware.resolve(explicit[0])
            b = hardware.newest(1, a.counted)[0]
        elif explicit:
            a, b = (hardware.resolve(argument) for argument in explicit)
        else:
            a, b = hardware.newest(2, hardware.newest(1)[0].counted)
        if a.path.resolve() == b.path.resolve():
            raise CommandError(f"RUN_A and RUN_B are the same file ({a.path}); name two runs")
        if a.counted != b.counted:
            raise CommandError(
                f"{a.path.name} is a {kind(a.counted)} run and {b.path.name} a {kind(b.counted)} "
                "one: a count and a time cannot be compared; name two runs of one kind"
            )
        thresholds = parse_thresholds(args.threshold, alpha=args.alpha)
        if args.json:
            out.write(compare_json(a, b, thresholds, args.filter))
        else:
            out.write(compare_text(a, b, thresholds, args.filter, args.markdown))
        return 0
