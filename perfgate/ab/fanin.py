"""The fan-in of a sharded nightly: each of N runners ran ``perfgate nightly`` on its part
(``--perf-shard I/N``), its stored comparison and the A/B of its own flagged cases; here their
nights become one, judged by the same policy: only an A/B-confirmed regression (or a failing
test) fails it, a night that gated nothing cannot pass, and a shard whose A/B stopped leaves the
night incomplete. The shards must be the N parts of one split, each once."""

from __future__ import annotations

from pathlib import Path

from perfgate.ab import AbError
from perfgate.ab.exits import verdict_status
from perfgate.ab.night import read_verdicts, write
from perfgate.parts import check_split, label_parts
from perfgate.report.nightly import markdown
from perfgate.verdict import nightly as policy

SHARDS_REFUSED = 3  # as perfgate merge's: not the N shards of one night
VERDICTS = "nightly-verdicts.json"


class ShardsRefused(AbError):
    """Folders that are not the N shard nights of one split; one line saying which."""


def read_night(folder: Path) -> policy.Night:
    path = folder / VERDICTS
    missing = ShardsRefused(
        f"{path} is missing: that shard's nightly did not finish (see its job); run it again"
    )
    return read_verdicts(path, policy.from_json, missing, "a nightly's verdicts")


def merged(nights: dict[Path, policy.Night]) -> policy.Night:
    """One night of the shard nights: every part 1 to N once (ShardsRefused otherwise)."""
    labelled = []
    for folder, night in nights.items():
        if night.shard is None:
            raise ShardsRefused(f"{folder / VERDICTS} is not a shard's night (no --perf-shard)")
        try:
            labelled.append((*label_parts(night.shard), str(folder)))
        except ValueError as error:
            raise ShardsRefused(f"{folder / VERDICTS}: {error}") from None
    try:
        check_split(labelled, "its nightly wrote no verdicts: give all {count} (run its job again)")
    except ValueError as error:
        raise ShardsRefused(str(error)) from None
    every = list(nights.values())
    rows = [row for night in every for row in night.rows]
    rows.sort(key=lambda n: (policy.ORDER.index(n.verdict), n.name))
    stopped = [f"shard {n.shard}: {n.stopped}" for n in every if n.stopped]
    first = every[0]
    return policy.Night(
        rows,
        ",".join(sorted({n.base_commit for n in every if n.base_commit})),
        first.blocks,
        first.target,
        first.screen,
        sum(n.failing_tests for n in every),
        "; ".join(stopped) or None,
        tuple(name for n in every for name in n.remaining),
    )


def fan_in(folders: list[Path], results: Path, out, err, command: str = "nightly") -> int:
    """Merge the shard nights in ``folders`` into ``results``; the night's exit status (3 with
    one line when they are not the N shards of one night)."""
    try:
        night = merged({folder: read_night(folder) for folder in folders})
    except ShardsRefused as error:
        print(f"perfgate {command}: refused: {error}", file=err)
        return SHARDS_REFUSED
    results.mkdir(parents=True, exist_ok=True)
    write(night, results, command)
    print(markdown(night, command), file=out)
    return verdict_status(night, results / "gate.json", err, command)
