"""The data behind ``perfgate compare`` and ``perfgate history``: rows, not formatting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.gate import DEFAULT_ALPHA, DEFAULT_TIME_THRESHOLD, TimeImprovement, TimeRegression
from perfgate.runs import Run, RunError, environment_changes, matches, median, samples
from perfgate.stats import MIN_ROUNDS, Comparison, compare_samples

# Verdicts of a compare row, most severe first: the order rows are listed in.
VERDICTS = ("regression", "improvement", "unchanged", "n/a", "only in A", "only in B")


@dataclass(frozen=True)
class CompareRow:
    """One benchmark in two runs; medians in seconds, change in percent of A's median."""

    name: str
    fullname: str
    median_a: float | None
    median_b: float | None
    verdict: str
    comparison: Comparison | None = None  # None: fewer than MIN_ROUNDS rounds, or one side only

    @property
    def change_percent(self) -> float | None:
        if self.median_a is None or self.median_b is None:
            return None
        return (self.median_b / self.median_a - 1.0) * 100.0

    @property
    def p_value(self) -> float | None:
        """One-sided p-value in the direction of the change (slower if B's median is larger)."""
        c = self.comparison
        if c is None:
            return None
        return c.p_value if c.ratio >= 1.0 else c.p_value_faster


def compare_one(
    a: dict | None,
    b: dict | None,
    threshold: float = DEFAULT_TIME_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> CompareRow:
    """Compare one benchmark of run A (baseline) with run B; either may be None (missing)."""
    present = a if a is not None else b
    name, fullname = present["name"], present.get("fullname", present["name"])
    if a is None or b is None:
        verdict = "only in B" if a is None else "only in A"
        only = median(present)
        return CompareRow(
            name, fullname, only if b is None else None, only if a is None else None, verdict
        )
    rounds_a, rounds_b = samples(a), samples(b)
    if min(len(rounds_a), len(rounds_b)) < MIN_ROUNDS:
        return CompareRow(name, fullname, median(a), median(b), "n/a")
    comparison = compare_samples(rounds_a, rounds_b)
    if TimeRegression(threshold, alpha).fails(comparison):
        verdict = "regression"
    elif TimeImprovement(threshold, alpha).fails(comparison):
        verdict = "improvement"
    else:
        verdict = "unchanged"
    return CompareRow(
        name,
        fullname,
        comparison.baseline_median,
        comparison.current_median,
        verdict,
        comparison,
    )


def _severity(row: CompareRow) -> tuple[int, float, str, str]:
    # regressions, then improvements, then the rest (unchanged and n/a mixed) by size of change
    rank = {"regression": 0, "improvement": 1, "unchanged": 2, "n/a": 2}.get(row.verdict, 3)
    change = abs(row.change_percent) if row.change_percent is not None else 0.0
    return rank, -change, row.verdict, row.name


def compare_runs(
    a: Run,
    b: Run,
    patterns: Sequence[str] = (),
    threshold: float = DEFAULT_TIME_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> list[CompareRow]:
    """Rows for every benchmark (matched by fullname) in A or B, sorted by severity.

    Benchmarks present on one side only come last, "only in A" before "only in B".
    """
    names = list(a.benchmarks) + [n for n in b.benchmarks if n not in a.benchmarks]
    rows = []
    for fullname in names:
        one, two = a.benchmarks.get(fullname), b.benchmarks.get(fullname)
        if patterns and not matches(one if one is not None else two, patterns):
            continue
        try:
            rows.append(compare_one(one, two, threshold, alpha))
        except ValueError as error:  # per-round data that is not a list of positive seconds
            raise RunError(f"{fullname} in {a.path} vs {b.path}: {error}") from error
    return sorted(rows, key=_severity)


@dataclass(frozen=True)
class HistoryRow:
    """One run's measurement of a benchmark (seconds), None where the run lacks it."""

    run: Run
    median: float | None
    q1: float | None
    q3: float | None
    rounds: int | None
    changes: list[tuple[str, str, str]]  # environment changes from the previous run

    @property
    def iqr(self) -> float | None:
        return None if self.q1 is None or self.q3 is None else self.q3 - self.q1


def matching_benchmarks(runs: Sequence[Run], pattern: str) -> list[str]:
    """Fullnames matching ``pattern`` in any run, in first-seen order."""
    seen: dict[str, None] = {}
    for run in runs:
        for fullname, benchmark in run.benchmarks.items():
            if matches(benchmark, [pattern]):
                seen.setdefault(fullname)
    return list(seen)


def history(runs: Sequence[Run], fullname: str) -> list[HistoryRow]:
    """One row per run (in the given order, oldest first) for the benchmark ``fullname``."""
    rows, previous = [], None
    for run in runs:
        changes = [] if previous is None else environment_changes(previous, run.environment)
        previous = run.environment
        benchmark = run.benchmarks.get(fullname)
        if benchmark is None:
            rows.append(HistoryRow(run, None, None, None, None, changes))
            continue
        stats, rounds = benchmark["stats"], samples(benchmark)
        if rounds:
            q1, mid, q3 = (float(q) for q in np.percentile(rounds, [25, 50, 75]))
            rows.append(HistoryRow(run, mid, q1, q3, len(rounds), changes))
        else:
            q1, q3, count = stats.get("q1"), stats.get("q3"), stats.get("rounds")
            rows.append(HistoryRow(run, median(benchmark), q1, q3, count, changes))
    return rows
