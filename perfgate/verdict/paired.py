"""Paired decisions: two trees run in counterbalanced blocks (``perfgate ab``: A B, B A, A B,
...), block i of the baseline next to block i of the current tree, whichever ran first. Drift
that a pair shares cancels in its ratio, and a drift that is linear in time cancels across the
two orders, so a case is compared pair by pair and judged by the one judge
(``verdict.judge.judge_case``: the gate's preconditions, rules and words; time on the block
pairs, peak memory on the last pair) at the gate's threshold for it (``verdict.noise``: a marker,
one given, else the spread of the baseline's blocks, never below the device floor)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfgate.benchmark import Benchmark, Run
from perfgate.stats import (
    MIN_PAIRS,
    MIN_ROUNDS,
    UNBOUNDED_INTERVAL,
    Comparison,
    Samples,
    as_samples,
)
from perfgate.verdict.evidence import Evidence, untrusted_reason
from perfgate.verdict.judge import judge_case, unmeasured
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.pairing import declarations_of, same_run_ratios, worst_ratios
from perfgate.verdict.rules import RatioChange
from perfgate.verdict.thresholds import Thresholds
from perfgate.verdict.time_change import TOO_FEW_ROUNDS


def compare_paired_blocks(
    baseline_blocks: Samples,
    current_blocks: Samples,
    confidence: float = 0.95,
    b_first: Sequence[bool] = (),
    floor: float = 0.0,
) -> Comparison:
    """Compare per-block medians (seconds) of two trees run in block pairs (``perfgate ab``):
    block i of the baseline ran next to block i of the current tree; ``b_first[i]``: the current
    tree's block ran first in pair i (default: the baseline's, in every pair).

    Pairing cancels drift that both blocks of a pair share. A drift that is linear in time lands
    on the later block of each pair: on the current tree where it ran second, on the baseline
    where it ran first. So the pairs of each order weigh half (equal weights when only one order
    ran, or both equally often), and that drift cancels for any number of pairs; what it adds to
    each pair counts as noise, so the interval widens rather than moves. ``ratio`` is that
    weighted geometric mean of the per-pair ratios current/baseline; the p-values are one-sided
    t-tests of the weighted mean of their logs (the pairs' sample spread, n - 1 degrees of
    freedom), and the interval is its t interval, as a ratio. ``baseline_median`` and
    ``current_median`` are the blocks' geometric means with the same weights, so their ratio is
    ``ratio``. With fewer than ``MIN_ROUNDS`` pairs nothing is significant (p 1.0, interval
    (0, inf)); the least and greatest pair ratio (``round_ratio_low``/``high``) still say what
    the pairs show.
    """
    base = as_samples(baseline_blocks, "baseline_blocks")
    curr = as_samples(current_blocks, "current_blocks")
    if base.size != curr.size:
        raise ValueError(f"{base.size} baseline blocks but {curr.size} current blocks: pair them")
    weights = _order_weights(base.size, b_first)
    logs = np.log(curr / base)
    center = float(weights @ logs)
    ratio = float(np.exp(center))
    enough = base.size >= MIN_ROUNDS
    p_slower = p_faster = 1.0
    low, high = UNBOUNDED_INTERVAL
    # a few pairs can agree by chance far more closely than their blocks can be measured: their
    # spread is never taken below ``floor``, what the blocks' own rounds put into each pair
    spread = max(float(np.std(logs, ddof=1)), floor) if enough else 0.0
    if enough and spread > 0:
        from scipy.stats import t as student  # here: importing scipy.stats takes 1.5 s

        error = spread * float(np.sqrt(weights @ weights))
        t = center / error
        p_slower = float(student.sf(t, base.size - 1))
        p_faster = float(student.cdf(t, base.size - 1))
        half = float(student.ppf(0.5 + confidence / 2, base.size - 1)) * error
        low, high = float(np.exp(center - half)), float(np.exp(center + half))
    elif enough:  # every pair gave the same ratio: exact
        p_slower, p_faster = (0.0, 1.0) if ratio > 1 else (1.0, 0.0) if ratio < 1 else (1.0, 1.0)
        low = high = ratio
    return Comparison(
        baseline_median=float(np.exp(weights @ np.log(base))),
        current_median=float(np.exp(weights @ np.log(curr))),
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


def _order_weights(pairs: int, b_first: Sequence[bool]) -> np.ndarray:
    """Each pair's weight: half the total to each order that ran (equal weights otherwise)."""
    orders = np.asarray(list(b_first) or [False] * pairs, dtype=bool)
    if orders.size != pairs:
        raise ValueError(f"{orders.size} pair orders for {pairs} block pairs: give one a pair")
    if orders.all() or not orders.any():
        return np.full(pairs, 1.0 / pairs)
    return np.where(orders, 0.5 / orders.sum(), 0.5 / (~orders).sum())


def block_median(benchmark: Benchmark, rounds: int | None = None) -> float:
    """Median seconds of a block's first ``rounds`` rounds (all of them when None)."""
    if not benchmark.samples:  # saved without per-round data: its stored median
        return benchmark.median
    samples = benchmark.samples[:rounds] if rounds else benchmark.samples
    return Benchmark(benchmark.fullname, benchmark.name, samples=samples).median


def rounds_floor(blocks: list[Benchmark], rounds: int | None = None) -> float:
    """The least spread a pair's log ratio can have, from the rounds of its two blocks: a block
    median's standard error is about 1.25 standard deviations of its rounds (of their logs)
    over the square root of their count, and a pair holds two. 0 where a block has too few
    rounds to say."""
    errors = []
    for block in blocks:
        samples = np.log(np.asarray(block.samples[:rounds] if rounds else block.samples))
        if samples.size < MIN_ROUNDS:
            return 0.0
        errors.append(1.2533 * float(np.std(samples, ddof=1)) / np.sqrt(samples.size))
    return float(np.sqrt(2 * np.mean(np.square(errors)))) if errors else 0.0


def judge_pairs(
    name: str,
    pairs: list[tuple[Benchmark, Benchmark]],
    thresholds: Thresholds,
    rounds_per_block: int | None = None,
    untrusted: str | None = None,
    ratios: tuple[RatioChange, ...] = (),
    b_first: Sequence[bool] = (),
    tested: int = 1,
) -> GateResult:
    """The verdict on one case from its (baseline block, current block) pairs, by the one judge
    (``judge_case``): the same preconditions, threshold and rules as the gate's. The blocks are
    their own confirmation: a slowdown is a regression at once. ``untrusted``: why the GPU of a
    block session cannot be trusted; ``b_first``: per pair, whether the current block ran
    first (``compare_paired_blocks``); ``tested``: the cases of the A/B, tested together."""
    if not pairs:
        return unmeasured(name, f"{TOO_FEW_ROUNDS} (0 block pairs, needs {MIN_PAIRS})")
    a_blocks, b_blocks = [a for a, _ in pairs], [b for _, b in pairs]
    before, now = _merged(name, a_blocks), _merged(name, b_blocks)
    medians = [
        (block_median(a, rounds_per_block), block_median(b, rounds_per_block)) for a, b in pairs
    ]
    floor = rounds_floor([block for pair in pairs for block in pair], rounds_per_block)
    comparison = compare_paired_blocks(
        [a for a, _ in medians], [b for _, b in medians], b_first=b_first, floor=floor
    )
    declared = now.declarations or before.declarations
    evidence = Evidence(
        name,
        before,
        now,
        declared,
        tuple(a_blocks),
        untrusted,
        ratios=ratios,
        paired=comparison,
        tested=tested,
    )
    return judge_case(evidence, thresholds)


def judge_blocks(
    pairs: list[tuple[Run, Run, bool]],
    thresholds: Thresholds,
    rounds_per_block: int | None = None,
    tested: int | None = None,
) -> list[GateResult]:
    """Every case of an A/B's block pairs ((A's block, B's block, whether B ran first), in the
    order they ran), worst first: each compared on the pairs that ran it in both blocks,
    untrusted when another process used a block session's GPU (``untrusted_reason``, paired),
    with its same-run ratios (``block_ratios``). The A/B's cases are tested together:
    ``tested`` of them (default: the cases of these pairs), each one's p-values adjusted for
    their number, so that sending more cases to an A/B never means more false alarms."""
    a_runs, b_runs = [a for a, _, _ in pairs], [b for _, b, _ in pairs]
    names = sorted(set().union(*(run.benchmarks for run in a_runs + b_runs)))
    untrusted = untrusted_reason(a_runs, b_runs, paired=True) if b_runs else None
    ratios = block_ratios(a_runs, b_runs)
    results = []
    for name in names:
        both = [
            (a.benchmarks[name], b.benchmarks[name], first)
            for a, b, first in pairs
            if name in a.benchmarks and name in b.benchmarks
        ]
        results.append(
            judge_pairs(
                name,
                [(a, b) for a, b, _ in both],
                thresholds,
                rounds_per_block,
                untrusted,
                ratios.get(name, ()),
                [first for _, _, first in both],
                tested or len(names),
            )
        )
    return sorted(results, key=lambda r: (list(Verdict).index(r.verdict), r.name))


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
                kept.append(
                    RatioChange(
                        ratio_name,
                        worst[name][ratio_name].value,
                        now,
                        now,
                        found[0].higher_is_better,
                    )
                )
        changes[name] = tuple(kept)
    return changes


def _merged(name: str, blocks: list[Benchmark]) -> Benchmark:
    """A side's blocks as one benchmark: every round, and the last block's extra_info (its
    peak memory, host-bound mark, code path, declarations)."""
    rounds = tuple(x for block in blocks for x in block.samples)
    return Benchmark(name, blocks[-1].name, extra_info=blocks[-1].extra_info, samples=rounds)
