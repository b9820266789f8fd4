"""Gate saved instruction-count runs against a baseline with the gate's own code, offline.

``python tools/instruction_gate_check.py BASELINE.json RUN.json [RUN.json ...]`` prints, for each
run, what ``--perf-gate`` says about it (the same ``run_gate`` and report), then each counted
repeat judged on its own by ``counter_findings`` as if it were a run of one repeat: the repeats
before injection (``uninjected_per_call``, stored by PERFGATE_INJECT_INSTRUCTIONS runs) are
A/A trials, the injected ones injection trials. Markdown, for docs/gate-validation/.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from perfgate.baselines import load_run
from perfgate.counters import SECONDS_PER_INSTRUCTION, counter_findings, function_diff
from perfgate.gate import Thresholds
from perfgate.gate_report import environment_difference, markdown
from perfgate.run_gate import GateInputs, measured_from_run, run_gate


def gate_markdown(baseline: dict, run: dict, label: str, tolerance: float) -> str:
    current = measured_from_run(run["benchmarks"])
    markers = {name: ("host", tolerance) for name in current}  # as the test module declares
    results = run_gate(
        [measured_from_run(baseline["benchmarks"])], current, GateInputs(markers, Thresholds())
    )
    changes = environment_difference(baseline["machine_info"], run["machine_info"])
    return markdown(results, changes, label).replace("# perfgate gate", "### The gate's verdict")


def trials(baseline: dict, run: dict, tolerance: float) -> list[str]:
    """One table row per case: its repeats judged one by one, before and after injection."""
    by_name = {b["name"]: b["extra_info"] for b in baseline["benchmarks"]}
    rows = []
    for bench in run["benchmarks"]:
        extra, base = bench["extra_info"], by_name.get(bench["name"])
        if base is None:
            continue
        samples = [s / SECONDS_PER_INSTRUCTION for s in bench["stats"]["data"]]
        plain, injected = samples, []
        if extra.get("injected_instructions"):
            plain, injected = extra["uninjected_per_call"], samples
        rows.append(_row(bench["name"], base, extra, plain, injected, tolerance))
    return rows


def _flagged(base: dict, extra: dict, per_call: float, tolerance: float) -> bool:
    trial = {**extra, "instructions": round(per_call)}
    trial.pop("counters", None)  # exact counters are per session; this judges the count only
    return bool(counter_findings(base, trial, tolerance)[0])


def _changes(base: dict, values: list[float]) -> str:
    return ", ".join(f"{v / base['instructions'] - 1:+.3%}" for v in values)


def _row(name, base, extra, plain: list[float], injected: list[float], tolerance: float) -> str:
    aa = sum(_flagged(base, extra, v, tolerance) for v in plain)
    caught = sum(_flagged(base, extra, v, tolerance) for v in injected)
    share = extra.get("injected_instructions", 0) / statistics.median(plain or [1])
    top = function_diff(base, extra, top=1)[-1]
    return (
        f"| `{name}` | {base['instructions']:,} | {_changes(base, plain)} | {aa}/{len(plain)} | "
        f"{share:.2%} | {_changes(base, injected)} | {caught}/{len(injected)} | {top} |"
    )


HEADER = (
    "| case | baseline instructions/call | A/A repeats vs baseline | A/A flagged | injected "
    "(share of own count) | injected repeats vs baseline | injected flagged | top of the "
    "function diff |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--tolerance", type=float, default=0.005, help="default: the marker's")
    args = parser.parse_args()
    baseline = load_run(args.baseline)
    for path in args.runs:
        run = load_run(path)
        print(f"## {path.name} against {args.baseline.name}\n")
        print(f"Each repeat judged alone (tolerance {args.tolerance:.1%}):\n")
        print(HEADER)
        print("\n".join(trials(baseline, run, args.tolerance)))
        print()
        print(gate_markdown(baseline, run, args.baseline.name, args.tolerance))


if __name__ == "__main__":
    main()
