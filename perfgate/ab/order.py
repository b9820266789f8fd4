"""The order of the blocks and the cases of each GPU.

Blocks run in counterbalanced pairs: pair 0 runs A then B, pair 1 B then A, pair 2 A then B, and
so on (A B B A A B ...). A drift that is linear in time (warming, a declining clock) then lands
on B in one pair and on A in the next, and the paired statistics (``verdict.paired``) weigh the
two orders equally, so it cancels for any number of pairs; with the old order (A B A B) it landed
on B in every pair. Each pair is the two neighbouring blocks, whichever ran first.

A case keeps its lane (its GPU) for its A and its B blocks. Cases go to lanes in groups (a case
with the partners of its same-run ratios, which must run in one session), longest first onto the
least loaded lane, as ``--perf-shard`` splits a matrix.
"""

from __future__ import annotations

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


def lanes_of(names: list[str], lanes: int, costs: dict[str, float] | None = None,
             groups: dict[str, str] | None = None) -> list[list[str]]:  # fmt: skip
    """``names`` split over ``lanes`` lanes, each lane's sorted: groups (``groups``: name ->
    group; default: the test function) kept together, longest first (``costs``: seconds a case
    takes, default equal) onto the least loaded lane. Lanes beyond the groups stay empty."""
    groups = groups or {name: test_function(name) for name in names}
    part = parts.split(list(names), costs or {}, lanes, groups)
    return [sorted(n for n in names if part[n] == lane + 1) for lane in range(lanes)]


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
