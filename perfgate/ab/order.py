"""The order of the blocks and the cases of each GPU.

Blocks run in counterbalanced pairs: pair 0 runs A then B, pair 1 B then A, pair 2 A then B, and
so on (A B B A A B ...). A drift that is linear in time (warming, a declining clock) then lands
on B in one pair and on A in the next, and the paired statistics (``verdict.paired``) weigh the
two orders equally, so it cancels for any number of pairs; with the old order (A B A B) it landed
on B in every pair. Each pair is the two neighbouring blocks, whichever ran first.

A case's A and B blocks of one pair share a lane (a GPU). Cases go to lanes in groups (a case
with the partners of its same-run ratios, which must run in one session), by the seconds their
blocks take (``block_seconds``: what the journal measured, else the stored comparison's), longest
first onto the least loaded lane, as ``--perf-shard`` splits a matrix.
"""

from __future__ import annotations

from collections.abc import Iterable

from perfgate import parts
from perfgate.benchmark import Run
from perfgate.verdict.pairing import declarations_of, same_run_ratios

A, B = "A", "B"


def pair_order(pair: int) -> tuple[str, str]:
    """The trees of block pair ``pair`` (from 0) in the order they run."""
    return (A, B) if pair % 2 == 0 else (B, A)


def b_first(pair: int) -> bool:
    return pair_order(pair)[0] == B


def test_function(name: str) -> str:
    """A case's test function (``path::test`` of ``path::test[params]``): its ratio partners
    are cases of the same function."""
    return name.split("[", 1)[0]


def lanes_of(
    names: list[str],
    lanes: int,
    costs: dict[str, float] | None = None,
    groups: dict[str, str] | None = None,
) -> list[list[str]]:
    """``names`` split over ``lanes`` lanes, each lane's sorted: groups (``groups``: name ->
    group; default: the test function) kept together, longest first (``costs``: seconds a case
    takes, default equal) onto the least loaded lane. Lanes beyond the groups stay empty."""
    groups = groups or {name: test_function(name) for name in names}
    part = parts.split(list(names), costs or {}, lanes, groups)
    return [sorted(n for n in names if part[n] == lane + 1) for lane in range(lanes)]


def block_seconds(
    names: list[str], stored: dict[str, float], ran: Iterable[tuple[Iterable[str], float]]
) -> dict[str, float]:
    """Seconds a block of each of ``names`` takes, where known: the mean of its share of the
    blocks that ran it (``ran``: each block's cases and seconds, shared among them in proportion
    to ``stored``, a case without one weighing as the mean of those with one), else ``stored``
    (the stored comparison's seconds of each case, its setup, warm-up and compile included)."""
    shares: dict[str, list[float]] = {}
    for cases, seconds in ran:
        known = [stored[name] for name in cases if name in stored]
        weights = {
            name: stored.get(name, sum(known) / len(known) if known else 1.0) for name in cases
        }
        total = sum(weights.values())
        for name, weight in weights.items():
            share = weight / total if total > 0 else 1 / len(weights)
            shares.setdefault(name, []).append(seconds * share)
    found = {name: stored[name] for name in names if name in stored}
    found.update({name: sum(s) / len(s) for name, s in shares.items() if name in set(names)})
    return found


def ratio_groups(run: Run, names: list[str]) -> dict[str, str]:
    """Each of ``names`` with a group: the first name of the cases its same-run ratios join it
    to in ``run`` (a ratio is measured within one session), itself where it has none there."""
    ratios = same_run_ratios(run, declarations_of(run))
    group = {name: name for name in names}

    def root(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for name in sorted(names):
        for ratio in ratios.get(name, []):
            if ratio.partner in group:
                first, second = sorted((root(name), root(ratio.partner)))
                group[second] = first
    return {name: root(name) for name in names}
