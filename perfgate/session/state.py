"""One pytest session that asked for perfgate: its state, made once in ``pytest_configure``
(``start``) and kept in ``config.stash`` (``of``), never in module globals, so pytest sessions
run one after another in one process share nothing.

The state: the session's options (read once), its hardware key, the baseline it compares with
and the saver its run is saved through, the mode its benchmark cases run in (timed, profiled or
counted: ``measure.mode``), its shard, its side of an xdist session, and its gate. Plain code:
perfgate/plugin.py's hooks call it, in the orders written there.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import pytest

from perfgate import _pytest_benchmark, options
from perfgate.gate import GateSession
from perfgate.measure import mode as measure_mode
from perfgate.measure.mode import Mode
from perfgate.options import Options
from perfgate.session.baseline import BaselineChoice
from perfgate.session.saver import Saver
from perfgate.sharding import ShardSelection
from perfgate.workers import Controller, Worker


@dataclass
class SessionState:
    config: pytest.Config
    options: Options
    key: str  # the run's hardware key (its folder under the baselines root)
    choice: BaselineChoice
    saver: Saver
    mode: Mode
    clocks: tuple[str, bool] = ("", False)  # --perf-lock-clocks: the header line, whether locked
    shard: ShardSelection | None = None
    worker: Worker | None = None  # a pytest-xdist worker whose run the controller merges
    controller: Controller | None = None  # the controller that merges the workers' runs
    gate: GateSession | None = None

    def start_session(self, session: pytest.Session) -> None:
        """At session start (pytest-benchmark's session exists by then): route its saving
        through the saver, and give its table the chosen baseline."""
        self.saver.session = session
        _pytest_benchmark.route_saving(self.config, self.saver)
        if self.choice.baseline is not None:
            _pytest_benchmark.show_comparison_with(self.config, self.choice.baseline.path)

    def machine_info(self, use_cuda: bool) -> dict:
        """``machine_info["perfgate"]`` of the run."""
        from perfgate.measure import machine

        return {
            "hardware_key": self.key,
            "software": machine.software_versions(),
            "gpu_health": machine.gpu_health() if use_cuda else {"available": False},
            "clocks_locked": self.clocks[1],
            **(self.shard.machine_info() if self.shard else {}),
            **(self.worker.machine_info() if self.worker else {}),
        }

    def header(self) -> str | None:
        lines = [self.clocks[0], self.shard.header() if self.shard else ""]
        return "\n".join(line for line in lines if line) or None


KEY = pytest.StashKey[SessionState]()


def of(config: pytest.Config) -> SessionState | None:
    """The state of a session that asked for perfgate; None for one that did not."""
    return config.stash.get(KEY, None)


def start(config: pytest.Config, use_cuda: bool) -> SessionState:
    """Check and decide what can be before the first benchmark runs (usage errors, outputs, the
    baseline: a missing one costs a second, not a GPU run); the state, kept in the stash."""
    from perfgate import gate, instruction_cases, outputs, sharding, workers
    from perfgate.measure import machine, nvml
    from perfgate.session import baseline
    from perfgate.store import saving

    worker, controller = workers.configure(config, use_cuda)  # -n: pin, merge (xdist)
    read = options.read(config)  # after a worker turned its saving off: the controller saves
    clocks = ("", False)
    if read.lock_clocks and workers.times_here(config):
        line, undo = nvml.lock_base_clocks_for_session()
        clocks = (line, undo is not None)
        if undo is not None:
            config.add_cleanup(undo)
    mode = config.stash[measure_mode.KEY] = Mode(profile_dir=read.profile)
    _check_histogram(config)
    outputs.check_session_outputs(config)
    saving.interrupt_on_sigterm(config)
    thresholds = gate.thresholds_from(config) if read.gate else None  # usage errors first
    instruction_cases.check(read)
    key = instruction_cases.storage_key(read) or machine.hardware_key(use_cuda)
    choice = baseline.choose(config, key, read.gate)
    saver = Saver(config, choice, key)
    shard = sharding.selection(read.shard, choice.key_folder)  # a usage error for a bad value
    state = SessionState(config, read, key, choice, saver, mode, clocks, shard, worker, controller)
    if read.gate:
        gate_class = workers.gate_class(worker, controller)
        state.gate = gate_class(config, read, choice, saver, thresholds, mode, shard)
    config.stash[KEY] = state
    return state


def _check_histogram(config: pytest.Config) -> None:
    if config.getoption("benchmark_histogram", None) and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError(
            "--benchmark-histogram needs pygal: pip install 'perfgate[histogram]' "
            "(or pip install pygal pygaljs)"
        )
