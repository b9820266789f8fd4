"""A matrix of cases split into N parts balanced by stored durations: ``--perf-shard I/N``'s parts
(``session.sharding``) and the A/B's GPU lanes (``ab.order``). Pure: names and seconds in, each
name's part out; the same names and durations give the same split on every machine.
"""

from __future__ import annotations

import re

from perfgate.fields import MAX_SHARDS, shard_problem

SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse(text: str) -> tuple[int, int]:
    """(I, N) of ``I/N`` with 1 <= I <= N <= MAX_SHARDS; ValueError with the line to show."""
    if not (text or "").strip():
        raise ValueError("--perf-shard is empty (an unset CI variable?): give I/N, e.g. 1/2")
    match = SHARD.match(text)
    if not match:
        raise ValueError(f"--perf-shard {text!r}: give I/N, part I of N, e.g. 1/2")
    index, count = (int(digits) if len(digits) < 10 else 10**9 for digits in match.groups())
    if problem := shard_problem(index, count):
        example = f"1/{min(max(count, 2), MAX_SHARDS)}"
        raise ValueError(f"--perf-shard {text.strip()}: {problem}, e.g. {example}")
    return index, count


def durations(run) -> dict[str, float]:
    """Seconds each benchmark of a stored run spent timing: the sum of its per-round samples
    (the stored median when it has none)."""
    spent = {}
    for name, benchmark in run.benchmarks.items():
        total = sum(benchmark.samples) if benchmark.samples else benchmark.median
        spent[name] = max(float(total), 0.0)
    return spent


def split(
    names: list[str], stored: dict[str, float], count: int, groups: dict[str, str] | None = None
) -> dict[str, int]:
    """Each name's part (1..count): groups (``groups``: name -> group, default each name its
    own) longest first onto the least loaded part."""
    known = [stored[n] for n in names if n in stored]
    share = sum(known) / len(known) if known else 1.0
    members: dict[str, list[str]] = {}
    for name in sorted(set(names)):
        members.setdefault((groups or {}).get(name, name), []).append(name)
    cost = {group: sum(stored.get(n, share) for n in names) for group, names in members.items()}
    load = [0.0] * count
    part = {}
    for group in sorted(members, key=lambda g: (-cost[g], g)):
        lightest = min(range(count), key=lambda i: (load[i], i))
        part.update(dict.fromkeys(members[group], lightest + 1))
        load[lightest] += cost[group]
    return part
