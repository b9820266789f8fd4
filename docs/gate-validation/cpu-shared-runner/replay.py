"""Replays sessions whose rounds were kept (--benchmark-json) against a baseline run or set with
the perfgate importable here (a checkout on PYTHONPATH), so a rule can be judged on sessions
measured with an older wheel. The gate's re-run is stood in for by the rounds of the flagged
cases in the next session of the same kind (unchanged or 4x: the label holds "inject"), a later
measurement under the same load. Per session: the cases flagged by the first pass, and the
verdict each ends with; last, how many unchanged sessions failed and how many 4x sessions failed.
    PYTHONPATH=/work/main python replay.py BASELINE.json [...] -- SESSION/current.json ..."""

from __future__ import annotations

import sys
from pathlib import Path

from perfgate.benchmark import Run
from perfgate.store.reading import load, read_results
from perfgate.verdict import shift
from perfgate.verdict.judge import judge
from perfgate.verdict.outcome import Verdict


def kind(path: str) -> bool:
    return "inject" in Path(path).parent.name


def main(args: list[str]) -> None:
    cut = args.index("--")
    baselines = [load(Path(p)) for p in args[:cut]]
    paths = args[cut + 1 :]
    runs = {path: read_results(Path(path)) for path in paths}
    failed = {False: 0, True: 0}
    for path, current in runs.items():
        first = judge(baselines, current)
        flagged = {r.name for r in first if r.verdict is Verdict.UNCONFIRMED}
        print(f"{Path(path).parent.name}: {len(flagged)} flagged")
        for r in first:
            if r.name in flagged:
                c = r.comparison
                print(f"    {r.name}: {c.change_percent:+.0f}% at the median, fastest rounds "
                      f"{shift.fastest(c) - 1:+.0%}, threshold {r.threshold:.0%}")  # fmt: skip
        if not flagged:
            continue
        same = [p for p in paths if kind(p) == kind(path)]
        later = runs[same[(same.index(path) + 1) % len(same)]]
        again = Run(None, later.datetime, later.machine_info, later.commit_info,
                    {n: b for n, b in later.benchmarks.items() if n in flagged})  # fmt: skip
        final = [r for r in judge(baselines, current, confirmation=again) if r.name in flagged]
        failed[kind(path)] += any(r.verdict is Verdict.REGRESSION for r in final)
        for r in final:
            print(f"    -> {r.verdict.value}: {r.message}")
    for injected, word in ((False, "unchanged"), (True, "4x")):
        count = sum(kind(p) == injected for p in paths)
        print(f"{word} sessions failing: {failed[injected]} of {count}")


if __name__ == "__main__":
    main(sys.argv[1:])
