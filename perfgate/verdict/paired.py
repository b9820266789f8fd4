"""Paired decisions: two trees run in alternating blocks (``perfgate ab``), block i of the
baseline next to block i of the current tree. Drift that a pair shares cancels in its ratio, so
a case is compared pair by pair and judged by the gate's own rules and words (``verdict.rules``,
``verdict.outcome.decide``: time on the block pairs, peak memory on the last pair) at the gate's
threshold for it (``verdict.noise``: a marker, one given, else the spread of the baseline's
blocks, never below the device floor)."""

from __future__ import annotations

import numpy as np
from scipy import stats as _scipy_stats

from perfgate.benchmark import Benchmark
from perfgate.fields import Declared
from perfgate.stats import (
    MIN_PAIRS,
    MIN_ROUNDS,
    UNBOUNDED_INTERVAL,
    Comparison,
    Samples,
    as_samples,
)
from perfgate.verdict.noise import case_threshold
from perfgate.verdict.outcome import GateResult, Verdict, decide
from perfgate.verdict.rules import Case
from perfgate.verdict.thresholds import Thresholds
from perfgate.verdict.time_change import TOO_FEW_ROUNDS


def compare_paired_blocks(
    baseline_blocks: Samples, current_blocks: Samples, confidence: float = 0.95
) -> Comparison:
    """Compare per-block medians (seconds) of two trees run in alternating blocks (``perfgate
    ab``): block i of the baseline was run next to block i of the current tree.

    Pairing cancels drift that both blocks of a pair share. ``ratio`` is the geometric mean of
    the per-block ratios current/baseline; the p-values are one-sided one-sample t-tests on
    their logs, and the interval is the t interval of that mean, as a ratio. With fewer than
    ``MIN_ROUNDS`` pairs nothing is significant (p 1.0, interval (0, inf)); the least and
    greatest pair ratio (``round_ratio_low``/``high``) still say what the pairs show.
    """
    base = as_samples(baseline_blocks, "baseline_blocks")
    curr = as_samples(current_blocks, "current_blocks")
    if base.size != curr.size:
        raise ValueError(f"{base.size} baseline blocks but {curr.size} current blocks: pair them")
    logs = np.log(curr / base)
    ratio = float(np.exp(logs.mean()))
    enough = base.size >= MIN_ROUNDS
    p_slower = p_faster = 1.0
    low, high = UNBOUNDED_INTERVAL
    spread = float(np.std(logs, ddof=1)) if enough else 0.0
    if enough and spread > 0:
        t = _scipy_stats.ttest_1samp(logs, 0.0, alternative="greater")
        p_slower, p_faster = float(t.pvalue), float(1.0 - t.pvalue)
        half = _scipy_stats.t.ppf(0.5 + confidence / 2, base.size - 1) * spread / np.sqrt(base.size)
        low, high = float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))
    elif enough:  # every pair gave the same ratio: exact
        p_slower, p_faster = (0.0, 1.0) if ratio > 1 else (1.0, 0.0) if ratio < 1 else (1.0, 1.0)
        low = high = ratio
    return Comparison(
        baseline_median=float(np.median(base)),
        current_median=float(np.median(curr)),
        ratio=ratio,
        change_percent=(ratio - 1.0) * 100.0,
        p_value=p_slower,
        p_value_faster=p_faster,
        ratio_low=low,
        ratio_high=high,
        n_baseline=int(base.size),
        n_current=int(curr.size),
        confidence=confidence,
        enough_rounds=enough,
        smallest_p=0.0 if enough else 1.0,
        round_ratio_low=float(np.exp(logs.min())),
        round_ratio_high=float(np.exp(logs.max())),
        paired=True,
    )


def block_median(benchmark: Benchmark, rounds: int | None = None) -> float:
    """Median seconds of a block's first ``rounds`` rounds (all of them when None)."""
    samples = benchmark.samples[:rounds] if rounds else benchmark.samples
    return Benchmark(benchmark.fullname, benchmark.name, samples=samples).median


def judge_pairs(
    name: str,
    pairs: list[tuple[Benchmark, Benchmark]],
    thresholds: Thresholds,
    rounds_per_block: int | None = None,
) -> GateResult:
    """The verdict on one case from its (baseline block, current block) pairs, by the gate's rules
    (``decide``). The blocks are their own confirmation: a slowdown is a regression at once."""
    if len(pairs) < MIN_PAIRS:
        reason = f"{TOO_FEW_ROUNDS} ({len(pairs)} block pairs, needs {MIN_PAIRS})"
        return GateResult(name, Verdict.NOT_GATED, f"not gated: {reason}")
    baseline = [a for a, _ in pairs]
    merged = Benchmark(name, baseline[0].name, extra_info=pairs[-1][1].extra_info,
                       samples=tuple(x for a in baseline for x in a.samples))  # fmt: skip
    case = case_threshold(merged, baseline, merged.declarations, thresholds)
    medians = [(block_median(a, rounds_per_block), block_median(b, rounds_per_block))
               for a, b in pairs]  # fmt: skip
    comparison = compare_paired_blocks([a for a, _ in medians], [b for _, b in medians])
    row = dict(comparison=comparison, threshold=case.value, threshold_source=case.source)
    if case.too_noisy:
        return GateResult(name, Verdict.NOT_GATED, f"not gated: {case.too_noisy}", **row)
    (before, now), marker = pairs[-1], merged.declarations.get(Declared.THRESHOLD)
    judged = Case(name, before, now, case.value, thresholds, marker, comparison, paired=True)
    decision = decide(judged)
    return GateResult(name, decision.verdict, decision.message, **row)
