"""Paired decisions: two trees run in alternating blocks (``perfgate ab``), block i of the
baseline next to block i of the current tree. Drift that a pair shares cancels in its ratio, so
a case is compared pair by pair and judged by the one judge (``verdict.judge.judge_case``: the
gate's preconditions, rules and words; time on the block pairs, peak memory on the last pair) at
the gate's threshold for it (``verdict.noise``: a marker, one given, else the spread of the
baseline's blocks, never below the device floor)."""

from __future__ import annotations

import numpy as np
from scipy import stats as _scipy_stats

from perfgate.benchmark import Benchmark, Run
from perfgate.stats import (
    MIN_PAIRS,
    MIN_ROUNDS,
    UNBOUNDED_INTERVAL,
    Comparison,
    Samples,
    as_samples,
)
from perfgate.verdict.judge import Evidence, judge_case
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.pairing import declarations_of, same_run_ratios, worst_ratios
from perfgate.verdict.reason import Reason
from perfgate.verdict.rules import RatioChange
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
    if not benchmark.samples:  # saved without per-round data: its stored median
        return benchmark.median
    samples = benchmark.samples[:rounds] if rounds else benchmark.samples
    return Benchmark(benchmark.fullname, benchmark.name, samples=samples).median


def judge_pairs(
    name: str,
    pairs: list[tuple[Benchmark, Benchmark]],
    thresholds: Thresholds,
    rounds_per_block: int | None = None,
    untrusted: str | None = None,
    ratios: tuple[RatioChange, ...] = (),
) -> GateResult:
    """The verdict on one case from its (baseline block, current block) pairs, by the one judge
    (``judge_case``): the same preconditions, threshold and rules as the gate's. The blocks are
    their own confirmation: a slowdown is a regression at once. ``untrusted``: why the GPU of a
    block session cannot be trusted."""
    if not pairs:
        reason = f"{TOO_FEW_ROUNDS} (0 block pairs, needs {MIN_PAIRS})"
        return GateResult(name, Verdict.NOT_GATED, f"not gated: {reason}",
                          reason=Reason.TOO_FEW_ROUNDS)  # fmt: skip
    a_blocks, b_blocks = [a for a, _ in pairs], [b for _, b in pairs]
    before, now = _merged(name, a_blocks), _merged(name, b_blocks)
    medians = [(block_median(a, rounds_per_block), block_median(b, rounds_per_block))
               for a, b in pairs]  # fmt: skip
    comparison = compare_paired_blocks([a for a, _ in medians], [b for _, b in medians])
    declared = now.declarations or before.declarations
    evidence = Evidence(name, before, now, declared, tuple(a_blocks), untrusted, ratios=ratios,
                        paired=comparison)  # fmt: skip
    return judge_case(evidence, thresholds)


def block_ratios(a_runs: list[Run], b_runs: list[Run]) -> dict[str, tuple[RatioChange, ...]]:
    """Each case's same-run ratios in an A/B: A's worst block against B's median block, the B
    blocks their own confirmation (like the time rule's pairs)."""
    declared = declarations_of(*b_runs, *a_runs)
    worst = worst_ratios(a_runs, declared)
    values: dict[str, dict[str, list]] = {}
    for run in b_runs:
        for name, found in same_run_ratios(run, declared).items():
            for ratio in found:
                values.setdefault(name, {}).setdefault(ratio.name, []).append(ratio)
    changes: dict[str, tuple[RatioChange, ...]] = {}
    for name, by_ratio in values.items():
        kept = []
        for ratio_name, found in by_ratio.items():
            if ratio_name in worst.get(name, {}):
                now = float(np.median([ratio.value for ratio in found]))
                kept.append(RatioChange(ratio_name, worst[name][ratio_name].value, now, now,
                                        found[0].higher_is_better))  # fmt: skip
        changes[name] = tuple(kept)
    return changes


def _merged(name: str, blocks: list[Benchmark]) -> Benchmark:
    """A side's blocks as one benchmark: every round, and the last block's extra_info (its
    peak memory, host-bound mark, code path, declarations)."""
    rounds = tuple(x for block in blocks for x in block.samples)
    return Benchmark(name, blocks[-1].name, extra_info=blocks[-1].extra_info, samples=rounds)
