"""The A/B's decision rule on a virtual clock: false alarms and detection, with 95 % bounds.

A night sends ``cases`` cases to the A/B. Each case runs ``blocks`` counterbalanced block pairs
(A, the baseline's commit; B, the tree under test), then ``more`` pairs if the first ones leave it
undecided, as ``perfgate ab`` and the nightly do (``perfgate.ab.engine``). A block's rounds sit
around the block's own level: the case's time, times the tree's change (B only), a drift that
both blocks of a pair share, and the block's own scatter (lognormal, ``sigma`` of the log). The
verdict on each case is whatever ``perfgate.verdict.paired.judge_blocks`` of the perfgate on
``sys.path`` says, at the nightly's target threshold (3 %), so today's rule and another
checkout's can be run side by side: ``PYTHONPATH=OTHER_CHECKOUT python simulate.py``.

Block scatter, from the GPU nights: device-timed kernels 0.5 % of the log a block (their block
medians within about +-1 %), compile-heavy ResNet-18 cases 6 % (3 pairs of them gave a 95 %
interval of [0.885, 1.335] on unchanged code). Rounds: 20 a block, 2 % round noise. A pair's
shared drift: up to +-10 %.

Usage: python simulate.py [--nights N] [--seed S] [--more M] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
from scipy.stats import beta

from perfgate.ab.engine import undecided as engine_undecided
from perfgate.benchmark import Benchmark, Run
from perfgate.verdict import Thresholds, Verdict
from perfgate.verdict.paired import judge_blocks

KERNEL, RESNET = 0.005, 0.06  # block scatter (sigma of the log) of the two kinds of case
ROUNDS, ROUND_NOISE, DRIFT = 20, 0.02, 0.10
TARGET = 0.03
BLOCKS, MORE = 3, 7


def _run(benchmarks: dict[str, Benchmark]) -> Run:
    return Run(None, "2026-01-01T00:00:00", {}, {}, benchmarks)


def _block(rng, name: str, level: float) -> Benchmark:
    samples = level * np.exp(rng.normal(0.0, ROUND_NOISE, ROUNDS))
    return Benchmark(name, name.split("::")[-1], samples=tuple(float(x) for x in samples))


def _pairs(rng, cases: dict[str, tuple[float, float]], first: int, count: int) -> list:
    """``count`` pairs (A's run, B's run, B first) of ``cases`` (name -> (change, sigma))."""
    pairs = []
    for index in range(first, first + count):
        a, b = {}, {}
        for name, (change, sigma) in cases.items():
            drift = math.exp(rng.uniform(-DRIFT, DRIFT))
            a[name] = _block(rng, name, 1e-3 * drift * math.exp(rng.normal(0, sigma)))
            b[name] = _block(rng, name, 1e-3 * drift * change * math.exp(rng.normal(0, sigma)))
        pairs.append((_run(a), _run(b), index % 2 == 1))
    return pairs


def _again(results: list, more: int) -> set[str]:
    """The cases the engine gives more pairs (``perfgate.ab.engine.undecided`` of the perfgate
    on ``sys.path``: today's only where more pairs can decide them)."""
    try:
        return set(engine_undecided(results, more))
    except TypeError:  # a perfgate whose engine gives them to every undecided case
        return set(engine_undecided(results))


def _judge(pairs: list, cases: int) -> list:
    thresholds = Thresholds(default=TARGET)
    try:  # a perfgate that tests an A/B's cases together is told how many there are
        return judge_blocks(pairs, thresholds, None, cases)
    except TypeError:
        return judge_blocks(pairs, thresholds, None)


def night(rng, cases: dict[str, tuple[float, float]], more: int = MORE) -> dict[str, Verdict]:
    """One night's A/B of ``cases`` (name -> (change, sigma)): ``BLOCKS`` pairs of every case,
    ``MORE`` more of those left undecided, all judged together as the A/B's last word."""
    pairs = _pairs(rng, cases, 0, BLOCKS)
    first = _judge(pairs, len(cases))
    again = {name: cases[name] for name in _again(first, more)}
    if again and more:
        pairs += _pairs(rng, again, BLOCKS, more)
        first = _judge(pairs, len(cases))
    return {r.name: r.verdict for r in first}


def bounds(hits: int, total: int) -> tuple[float, float]:
    """The 95 % Clopper-Pearson interval of a rate of ``hits`` in ``total``."""
    low = 0.0 if hits == 0 else float(beta.ppf(0.025, hits, total - hits + 1))
    high = 1.0 if hits == total else float(beta.ppf(0.975, hits + 1, total - hits))
    return low, high


def simulate(nights: int, seed: int, more: int = MORE) -> dict:
    """Null nights (every case unchanged) and injected ones (some kernels slower by 3, 3.5, 4,
    5 %): per kind of case, how many decisions said regression, undecided, unchanged."""
    rng = np.random.default_rng(seed)
    tally: dict[str, dict[str, int]] = {}

    def count(row: str, verdict: Verdict) -> None:
        words = {Verdict.REGRESSION: "regression", Verdict.UNCHANGED: "unchanged"}
        cell = tally.setdefault(row, {"regression": 0, "undecided": 0, "unchanged": 0,
                                      "other": 0, "nights failed": 0, "nights": 0})  # fmt: skip
        cell[words.get(verdict, "undecided" if verdict.value in ("undecided", "not gated")
                       else "other")] += 1  # fmt: skip

    for index in range(nights):
        # a null night like the 2-GPU one: 20 kernels and 4 compile-heavy cases to the A/B
        cases = {f"k::kernel{i}": (1.0, KERNEL) for i in range(20)}
        cases |= {f"r::resnet{i}": (1.0, RESNET) for i in range(4)}
        verdicts = night(rng, cases, more)
        for name, verdict in verdicts.items():
            count("null, kernels" if name.startswith("k::") else "null, ResNet", verdict)
        for row in ("null, kernels", "null, ResNet"):
            kind = "k::" if "kernels" in row else "r::"
            tally[row]["nights"] += 1
            tally[row]["nights failed"] += any(
                v is Verdict.REGRESSION for n, v in verdicts.items() if n.startswith(kind)
            )
        # an injected night like the 4-GPU one: 70 cases, 10 kernels slower by each change
        for change in (1.03, 1.035, 1.04, 1.05):
            if index % 4:
                continue  # a quarter of the nights: enough changed cases for the rates
            cases = {f"k::kernel{i}": (change if i < 10 else 1.0, KERNEL) for i in range(56)}
            cases |= {f"r::resnet{i}": (1.0, RESNET) for i in range(14)}
            for name, verdict in night(rng, cases, more).items():
                if name.startswith("k::") and int(name[9:]) < 10:
                    count(f"kernels +{(change - 1) * 100:g} %", verdict)
    return tally


def table(tally: dict) -> list[str]:
    lines = ["| cases | decisions | regression (95 % bounds) | undecided | unchanged | nights "
             "with a false alarm |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for row, cell in tally.items():
        total = sum(cell[k] for k in ("regression", "undecided", "unchanged", "other"))
        low, high = bounds(cell["regression"], total)
        rate = cell["regression"] / total
        nights = f"{cell['nights failed']} of {cell['nights']}" if cell["nights"] else "-"
        lines.append(
            f"| {row} | {total} | {rate:.1%} [{low:.1%}, {high:.1%}] | "
            f"{cell['undecided'] / total:.1%} | {cell['unchanged'] / total:.1%} | {nights} |"
        )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--more", type=int, default=MORE, help="pairs for the undecided")
    parser.add_argument("--json", help="write the tally here")
    args = parser.parse_args(argv)
    tally = simulate(args.nights, args.seed, args.more)
    print("\n".join(table(tally)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(tally, stream, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
