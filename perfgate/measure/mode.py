"""What the benchmark cases of one pytest session do when they run: be timed (the main loop), or,
in a pass after it, be profiled or have their launches counted instead; and what they left.

One ``Mode`` per pytest session, kept in that session's ``config.stash``: the passes after the
main loop (``perfgate.session.gate``, ``perfgate.plugin``) switch it, ``measure.timing`` reads it
through the benchmark fixture (``of``). Nothing is kept at module level, so pytest sessions run
one after another in one process never see each other's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark


@dataclass
class Mode:
    profile_dir: Path | None = None  # profile each case into files here instead of timing it
    collecting: bool = False  # profile each case instead of timing it, keeping the compact profile
    counting: bool = False  # count each CUDA case's launches instead of timing it
    profilable: set[str] = field(default_factory=set)  # timed cases that can be profiled
    unprofiled: set[str] = field(default_factory=set)  # timed by time_rounds: never profiled
    countable: set[str] = field(default_factory=set)  # CUDA cases timed by wall time
    profiles: dict[str, dict] = field(default_factory=dict)  # fullname -> compact profile
    counts: dict[str, dict] = field(default_factory=dict)  # fullname -> launch counts

    def profiling(self) -> bool:
        """True when benchmark cases are profiled instead of timed."""
        return self.profile_dir is not None or self.collecting

    @contextmanager
    def switched(self, **values: object) -> Iterator[Mode]:
        """The mode with ``values`` set (e.g. ``counting=True``) for a pass, then as before."""
        before = {name: getattr(self, name) for name in values}
        for name, value in values.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in before.items():
                setattr(self, name, value)


KEY = pytest.StashKey[Mode]()


def of_config(config: pytest.Config) -> Mode:
    """The session's mode (made on first use: a session that did not ask for perfgate times)."""
    return config.stash.setdefault(KEY, Mode())


def of(benchmark) -> Mode:
    """The mode of the session a benchmark fixture belongs to (a fresh one for a stand-in)."""
    config = _pytest_benchmark.config_of(benchmark)
    return Mode() if config is None else of_config(config)
