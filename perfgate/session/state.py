"""One pytest session that asked for perfgate: its state, made once in ``pytest_configure``
(``plugin.start``) and kept in ``config.stash`` (``of``), never in module globals, so pytest
sessions run one after another in one process share nothing.

The state: the session's options (read once), its hardware key, the baseline it compares with
and the saver its run is saved through, the mode its benchmark cases run in (timed, profiled or
counted: ``measure.mode``), its shard, its side of an xdist session, its gate, and the GPU it
times on. Plain code: perfgate/plugin.py's hooks call it, in the orders written there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

# the types below by their whole names: plugin.start builds the state, and this module imports
# nothing above it (gate, workers)
import perfgate
from perfgate import _pytest_benchmark, store
from perfgate.fields import RUN_FORMAT, RunField


@dataclass
class SessionState:
    config: pytest.Config
    options: perfgate.options.Options
    key: str  # the run's hardware key (its folder under the baselines root)
    choice: perfgate.session.baseline.BaselineChoice
    saver: perfgate.session.saver.Saver
    mode: perfgate.measure.mode.Mode
    clocks: tuple[str, bool] = ("", False)  # --perf-lock-clocks: the header line, whether locked
    shard: perfgate.session.sharding.ShardSelection | None = None
    worker: perfgate.session.workers.Worker | None = None  # an xdist worker, merged by controller
    controller: perfgate.session.workers.Controller | None = None  # merges the workers' runs
    gate: perfgate.session.gate.GateSession | None = None
    gpu: dict | None = None  # the GPU this process times on (fields.Gpu), where it is one
    interrupts: perfgate.session.interrupts.Interrupts | None = None  # Ctrl-C and SIGTERM

    def start_session(self, session: pytest.Session) -> None:
        """At session start (pytest-benchmark's session exists by then): route its saving
        through the saver, and give its table the chosen baseline."""
        self.saver.session = session
        _pytest_benchmark.route_saving(self.config, self.saver, self.saver.write_json)
        if self.choice.baseline is not None:
            path = self.choice.baseline.path  # read once more: per-round data bounded
            entries = store.comparison_entries(path)
            _pytest_benchmark.show_comparison_with(self.config, path, entries)

    def machine_info(self, use_cuda: bool) -> dict:
        """``machine_info["perfgate"]`` of the run."""
        from perfgate.measure import machine

        return {
            RunField.FORMAT: RUN_FORMAT,
            RunField.HARDWARE_KEY: self.key,
            RunField.SOFTWARE: machine.software_versions(),
            RunField.GPU_HEALTH: machine.gpu_health() if use_cuda else {"available": False},
            RunField.CLOCKS_LOCKED: self.clocks[1],
            **(self.shard.machine_info() if self.shard else {}),
            **({RunField.GPU: self.gpu} if self.gpu else {}),
        }

    def header(self) -> str | None:
        lines = [self.clocks[0], self.shard.header() if self.shard else ""]
        return "\n".join(line for line in lines if line) or None


KEY = pytest.StashKey[SessionState]()


def of(config: pytest.Config) -> SessionState | None:
    """The state of a session that asked for perfgate; None for one that did not."""
    return config.stash.get(KEY, None)
