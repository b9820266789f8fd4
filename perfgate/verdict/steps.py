"""Steps in a benchmark's history: where the median per run moved to a new level, and stayed.

Method: PELT (Killick et al. 2012, the ``ruptures`` package) proposes change points on the log
of the run medians, scaled by a robust estimate of the run-to-run noise. Each proposal is then
judged by a permutation test over the runs between its neighbouring proposals (E-divisive's
test, Matteson and James 2014): the statistic is the largest two-sample t over every split of
that window, so picking the best split is part of the null distribution. As in Hunter (Fleming
et al. 2023), the weakest proposal is dropped and its neighbours judged again over the wider
window, until each step left has a p-value below ``alpha`` and moved the median by at least
``min_change``. On pure noise this keeps about ``alpha`` of series with a false step (measured
in tests/test_verdict_steps.py).

The unit of evidence is a run, not a round: rounds of one session share its machine state, so
a per-round test calls every session-to-session difference significant. A step therefore needs
a few runs on each side (with 3 and 3 the smallest possible p-value is 1/20).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from perfgate.format import fmt_percent

ALPHA = 0.01  # permutation p-value below which a proposed step is kept
MIN_CHANGE = 0.02  # smallest step kept, as a fraction of the median before it
MIN_SEGMENT = 3  # fewest runs on each side of a step
PERMUTATIONS = 2000
PENALTY_PER_LOG_N = 3.0  # PELT penalty, in units of the noise variance, per log(runs)
NOISE_FLOOR = 0.001  # relative noise assumed at least (a series of identical medians)


class StepsUnavailable(Exception):
    """Steps cannot be searched here (a package is missing); the message says what to do."""


@dataclass(frozen=True)
class Step:
    """A level shift in one benchmark's series: ``run`` is the first run at the new level,
    ``previous`` the last one before it; ``before``/``after`` are the median seconds of the
    runs on each side (up to the neighbouring steps)."""

    fullname: str
    run: object
    previous: object
    before: float
    after: float
    p_value: float

    @property
    def change_percent(self) -> float:
        return (self.after / self.before - 1.0) * 100.0

    @property
    def commit(self) -> str | None:
        return self.run.commit

    def describe(self) -> str:
        direction = "slower" if self.after > self.before else "faster"
        return (
            f"{fmt_percent(self.change_percent / 100, signed=True)} ({direction}) at "
            f"{self.run.path.name} "
            f"(commit {(self.commit or '?')[:8]}), p={self.p_value:.2g}"
        )


def noise_scale(logs: np.ndarray) -> float:
    """Robust standard deviation of run-to-run noise in a log series: the MAD of successive
    differences (a step is one outlier among them), divided by sqrt(2)."""
    diffs = np.diff(logs)
    mad = np.median(np.abs(diffs - np.median(diffs))) * 1.4826
    return max(float(mad) / math.sqrt(2.0), NOISE_FLOOR)


def _split_statistics(windows: np.ndarray, min_size: int) -> np.ndarray:
    """|t| of the pooled two-sample t-test at every split (columns) of every row."""
    m = windows.shape[1]
    sizes = np.arange(min_size, m - min_size + 1)
    total, squares = windows.sum(axis=1, keepdims=True), (windows**2).sum(axis=1, keepdims=True)
    left = np.cumsum(windows, axis=1)[:, sizes - 1]
    left_sq = np.cumsum(windows**2, axis=1)[:, sizes - 1]
    right, right_sq = total - left, squares - left_sq
    mean_left, mean_right = left / sizes, right / (m - sizes)
    within = (left_sq - left * mean_left) + (right_sq - right * mean_right)
    variance = np.maximum(within, 0.0) / (m - 2) + 1e-18
    scale = np.sqrt(variance * (1.0 / sizes + 1.0 / (m - sizes)))
    return np.abs(mean_right - mean_left) / scale


def permutation_p_value(window: np.ndarray, split: int, min_size: int, seed: int = 0) -> float:
    """P-value of a step at ``split`` in ``window``: how often a shuffled window has some split
    with a |t| at least as large as the observed one (the max over splits corrects for having
    chosen the best split)."""
    observed = _split_statistics(window[None, :], min_size)[0, split - min_size]
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.tile(window, (PERMUTATIONS, 1)), axis=1)
    extremes = _split_statistics(shuffled, min_size).max(axis=1)
    return float((1 + np.count_nonzero(extremes >= observed * (1 - 1e-9))) / (PERMUTATIONS + 1))


def proposed_changes(logs: np.ndarray, min_size: int) -> list[int]:
    """PELT change points (index of the first point of each new segment) on the scaled logs."""
    try:
        import ruptures
    except ImportError as error:
        raise StepsUnavailable(
            "change points need the ruptures package, which is not installed: pip install "
            "ruptures (or reinstall perfgate)"
        ) from error

    n = logs.size
    scaled = (logs - logs.mean()) / noise_scale(logs)
    penalty = PENALTY_PER_LOG_N * math.log(n)
    ends = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(scaled).predict(pen=penalty)
    return ends[:-1]  # ruptures ends the list with n


def _judge(values: np.ndarray, logs: np.ndarray, bounds: list[int], number: int, min_size: int):
    """(before, after, p-value) of the change point bounds[number] in its window."""
    start, split, end = bounds[number - 1], bounds[number], bounds[number + 1]
    before = float(np.median(values[start:split]))
    after = float(np.median(values[split:end]))
    p_value = permutation_p_value(logs[start:end], split - start, min_size, seed=split)
    return before, after, p_value


def detect(
    medians: Sequence[float],
    alpha: float = ALPHA,
    min_change: float = MIN_CHANGE,
    min_size: int = MIN_SEGMENT,
) -> list[tuple[int, float, float, float]]:
    """(index of the first run after the step, median before, median after, p-value) for each
    step in a series of run medians (seconds, oldest first).

    As in Hunter, the weakest proposal (largest p-value, or smaller than ``min_change``) is
    dropped and its neighbours judged again over the wider window, until every one left passes.
    """
    values = np.asarray(medians, dtype=np.float64)
    if values.size < 2 * min_size or not np.all(values > 0):
        return []
    logs = np.log(values)
    bounds = [0, *proposed_changes(logs, min_size), values.size]
    while len(bounds) > 2:
        judged = [_judge(values, logs, bounds, k, min_size) for k in range(1, len(bounds) - 1)]
        weakness = [
            p if abs(after / before - 1.0) >= min_change else 1.0 + p for before, after, p in judged
        ]
        weakest = int(np.argmax(weakness))
        if weakness[weakest] < alpha:
            return [(bounds[k + 1], *judged[k]) for k in range(len(judged))]
        del bounds[weakest + 1]
    return []


def measured(runs: Sequence, fullname: str) -> list:
    """The runs (oldest first) that measured ``fullname``."""
    return [run for run in runs if fullname in run.benchmarks]


def steps(runs: Sequence, fullname: str, **options) -> list[Step]:
    """The steps of one benchmark over ``runs`` (oldest first; runs lacking it are skipped)."""
    present = measured(runs, fullname)
    medians = [run.benchmarks[fullname].median for run in present]
    return [
        Step(fullname, present[i], present[i - 1], before, after, p)
        for i, before, after, p in detect(medians, **options)
    ]


def new_steps(
    runs: Sequence,
    since: datetime | None = None,
    moment: Callable[[object], datetime] | None = None,
    **options,
) -> list[Step]:
    """Steps that the runs recorded from ``since`` on (default: the newest run) made visible:
    found over all ``runs`` but not over the runs before ``since``, matched by the run where the
    step happened. This lists slow creep that no single run's gate caught. ``moment`` gives a
    run's recording time as an aware datetime (the store's ``recorded_at``: UTC offsets differ,
    so moments are compared, never strings)."""
    if not runs:
        return []
    if moment is None:
        raise ValueError("new_steps needs moment: when each run was recorded")
    since_at = since if since is not None else max(moment(run) for run in runs)
    older = [run for run in runs if moment(run) < since_at]
    fullnames: dict[str, None] = {}
    for run in runs:
        fullnames.update(dict.fromkeys(run.benchmarks))
    found = []
    for fullname in fullnames:
        known = {str(step.run.path) for step in steps(older, fullname, **options)}
        found += [s for s in steps(runs, fullname, **options) if str(s.run.path) not in known]
    return found


def steps_text(runs: Sequence, fullname: str) -> str:
    """What ``perfgate history`` prints under a benchmark's table: its steps, or why none."""
    found = steps(runs, fullname)
    rule = f"PELT, permutation p < {ALPHA:g}, at least {MIN_CHANGE:.0%}"
    if found:
        return "\n".join([f"steps ({rule}):", *(f"  {s.describe()}" for s in found)])
    count = len(measured(runs, fullname))
    if count < 2 * MIN_SEGMENT:
        return f"steps: none can be found in {count} runs (a step needs {MIN_SEGMENT} on each side)"
    return f"steps: none found in {count} runs ({rule})"
