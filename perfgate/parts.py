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
    index, count = _whole(match)
    if problem := shard_problem(index, count):
        example = f"1/{min(max(count, 2), MAX_SHARDS)}"
        raise ValueError(f"--perf-shard {text.strip()}: {problem}, e.g. {example}")
    return index, count


def _whole(match: re.Match) -> tuple[int, int]:
    # a number of 10 digits or more is past MAX_SHARDS: never read as a huge int
    index, count = (int(digits) if len(digits) < 10 else 10**9 for digits in match.groups())
    return index, count


def label_parts(label: object) -> tuple[int, int]:
    """(I, N) of a recorded shard label ``I/N`` (a nightly's ``shard``); ValueError saying why
    it names no part."""
    match = SHARD.match(label) if isinstance(label, str) else None
    if not match:
        raise ValueError(f"shard {label!r} names no part (not I/N)")
    index, count = _whole(match)
    if problem := shard_problem(index, count):
        raise ValueError(f"shard {label.strip()} names no part ({problem})")
    return index, count


def check_split(parts: list[tuple[object, object, str]], give_all: str) -> int:
    """N of the shards ``[(I, N, where)]`` when they are the N parts of one split, each once;
    ValueError with the line to show otherwise (``give_all``, formatted with ``count``, ends
    the line of a missing part). Every label is checked before N is used: a huge N is refused,
    never counted up to."""
    seen: dict[tuple[int, int], str] = {}
    for index, count, where in parts:
        if problem := shard_problem(index, count):
            raise ValueError(f"{where}: shard {index!r}/{count!r} names no part ({problem})")
        if (index, count) in seen:
            raise ValueError(
                f"shard {index}/{count} is given twice ({seen[index, count]} and {where})"
            )
        seen[index, count] = where
    counts = sorted({count for _, count in seen})
    if len(counts) > 1:
        raise ValueError(
            f"the shards are of different splits (N = {counts}); give the shards "
            "of one --perf-shard I/N split"
        )
    if not counts:
        raise ValueError("no shard given: give all N parts of one --perf-shard I/N split")
    count = counts[0]
    missing = [f"{i}/{count}" for i in range(1, count + 1) if (i, count) not in seen]
    if missing:
        raise ValueError(f"shard {', '.join(missing)} is missing; {give_all.format(count=count)}")
    return count


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
