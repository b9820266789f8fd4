"""``--perf-shard I/N``: this session runs part I of N of the collected matrix (CI runners).

The parts are balanced by the durations stored in the newest saved run of this hardware key:
groups of cases (a case and the partners of its same-run ratios, which must be timed in one
session) are placed longest first, each on the part with the least time so far (ties: the lower
part, then the name). A case the run does not hold counts as the mean stored case (one even
share); with no stored run every case counts the same. The split depends only on the collected
names and the stored run, so every runner of one CI matrix computes the same split, and a shard
of the same commit against the same baseline is the same set of cases from night to night.

Each shard run records ``machine_info.perfgate.shard`` (``{"index": I, "count": N}``), so
``perfgate merge`` can tell a missing shard from a complete set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.parts import durations, parse, split
from perfgate.session.declarations import ratio_group


class ShardSelection:
    """Keeps this shard's part of the collected items (after -k/-m, before the gate's checks)."""

    def __init__(self, index: int, count: int, folder: Path):
        self.index, self.count, self.folder = index, count, folder
        self.elsewhere: set[str] = set()  # cases of the other parts: not judged by this shard

    def select(self, config: pytest.Config, items: list) -> None:
        stored = self._stored()  # its cases that are not collected go to one part too
        groups = {item.nodeid: ratio_group(item) for item in items}  # ratio partners together
        part = split([item.nodeid for item in items] + list(stored), stored, self.count, groups)
        self.elsewhere = {name for name, index in part.items() if index != self.index}
        kept = [item for item in items if part[item.nodeid] == self.index]
        dropped = [item for item in items if part[item.nodeid] != self.index]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def _stored(self) -> dict[str, float]:
        from perfgate import store
        from perfgate.store import schema as run_schema

        runs = [r for r in store.saved_runs(self.folder) if not run_schema.from_the_future(r)]
        return durations(runs[-1]) if runs else {}

    def header(self) -> str:
        return f"perfgate: shard {self.index}/{self.count} of the collected cases"

    def machine_info(self) -> dict:
        """``{"shard": {"index": I, "count": N}}``, recorded with the run (``perfgate merge``)."""
        return {"shard": {"index": self.index, "count": self.count}}


def selection(text: str | None, folder: Path) -> ShardSelection | None:
    """The selection of ``--perf-shard I/N`` (None without it; a usage error for a bad value,
    an empty one included: an unset CI variable must not run the whole matrix)."""
    if text is None:
        return None
    try:
        index, count = parse(text)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    return ShardSelection(index, count, folder)
