"""The pytest plugin, as installed: wires options and hooks to the perfgate modules, nothing more.

Inert until asked. Every session gets perfgate's ``--perf-*`` options and its marker; only a
session that asks for perfgate (``options.asked``: a ``--perf-*`` option, or ``perfgate = true``
in the project's pytest configuration) gets the hooks of ``Asked``, which route pytest-benchmark's
store, compare and save through perfgate. An unasked session imports nothing beyond pytest and
``perfgate.options``, and pytest-benchmark runs as if perfgate were not installed.
"""

from __future__ import annotations

import importlib.util

import pytest

from perfgate import options

GATE_NOT_RUN = 6  # exit status: the gate could not run (session.GATE_NOT_RUN)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from perfgate import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add(parser)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads its storage and compare options
def pytest_configure(config: pytest.Config) -> None:
    for marker in options.MARKERS:
        config.addinivalue_line("markers", marker)
    if not options.asked(config):
        return
    if not hasattr(config.option, "benchmark_storage"):  # -p no:benchmark
        if config.getoption("--perf-gate"):
            pytest.exit(
                "perfgate gate cannot run: pytest-benchmark is not loaded (-p no:benchmark); "
                "run the gate without it",
                returncode=GATE_NOT_RUN,
            )
        return
    from perfgate.session import GateCannotRun

    try:
        config.pluginmanager.register(Asked(config), "perfgate-asked")
    except GateCannotRun as error:
        pytest.exit(f"perfgate gate cannot run: {error}", returncode=GATE_NOT_RUN)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on CUDA: one worker per GPU, each timing on its own (perfgate.workers)."""
    if not options.asked(config) or not uses_cuda(config):
        return None
    from perfgate.measure import gpu

    return gpu.device_count() or None


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-benchmark's own compares
def pytest_benchmark_compare_machine_info(machine_info: dict, compared_benchmark: dict) -> None:
    """A run saved by perfgate holds ``machine_info["perfgate"]``: for pytest-benchmark alone
    comparing with it, no machine difference (its warning is an error under filterwarnings)."""
    if "perfgate" not in machine_info:
        (compared_benchmark.get("machine_info") or {}).pop("perfgate", None)


class Asked:
    """The hooks of a session that asked for perfgate: store, compare, save, gate, profiles."""

    def __init__(self, config: pytest.Config):
        from perfgate import gate, instructions_plugin, outputs, session, sharding, workers
        from perfgate.measure import launch_counts, nvml
        from perfgate.measure import profiler as profiling
        from perfgate.store import saving

        self.config = config
        gate_class = workers.configure(config, uses_cuda(config))  # -n: pin, merge (xdist)
        self.clocks = ("", False)  # --perf-lock-clocks: the header line, and whether locked
        if config.getoption("--perf-lock-clocks") and workers.times_here(config):
            line, undo = nvml.lock_base_clocks_for_session()
            self.clocks = (line, undo is not None)
            if undo is not None:
                config.add_cleanup(undo)
        profiling.set_profile_dir(config.getoption("--perf-profile"))
        profiling.collected.clear()
        profiling.profilable.clear()
        _check_histogram(config)
        outputs.check_session_outputs(config)
        saving.interrupt_on_sigterm(config)
        if _stores_profiles(config):
            config.pluginmanager.register(profiling.ProfileStore(config), "perfgate-profile-store")
        use_gate = config.getoption("--perf-gate")
        launch_counts.countable.clear()
        launch_counts.collected.clear()
        if not use_gate and _saves(config):  # the gate counts after its own re-runs
            store = launch_counts.LaunchCountStore(config)
            config.pluginmanager.register(store, "perfgate-launch-counts")
        thresholds = gate.thresholds_from(config) if use_gate else None  # usage errors first
        instructions_plugin.configure(config)
        self.key = storage_key(config)
        choice = session.choose(config, self.key, use_gate)
        self.saver = session.Saver(config, choice, self.key)
        sharding.configure(config, choice.key_folder)  # --perf-shard: before the gate's checks
        if use_gate:
            gate_session = gate_class(config, choice, self.saver, thresholds)
            config.pluginmanager.register(gate_session, "perfgate-gate")

    @pytest.hookimpl(trylast=True)  # pytest-benchmark's session exists by now
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from perfgate import _pytest_benchmark

        self.saver.session = session
        _pytest_benchmark.route_saving(self.config, self.saver)
        if self.saver.choice.baseline is not None:
            _pytest_benchmark.show_comparison_with(self.config, self.saver.choice.baseline.path)

    def pytest_report_header(self) -> str | None:
        return self.clocks[0] or None

    @pytest.hookimpl(optionalhook=True, tryfirst=True)  # a project's own hook adds to it after
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict):
        from perfgate import sharding
        from perfgate.measure import machine

        use_cuda = uses_cuda(config)
        machine_info["perfgate"] = {
            "hardware_key": self.key,
            "software": machine.software_versions(),
            "gpu_health": machine.gpu_health() if use_cuda else {"available": False},
            "clocks_locked": self.clocks[1],
            **sharding.machine_info(config),
        }

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before pytest-benchmark saves and shows
    def pytest_sessionfinish(self, session: pytest.Session):
        from perfgate import _pytest_benchmark

        _pytest_benchmark.drop_unmeasured(self.config)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        from perfgate.declarations import declarations, uses_benchmark

        fixture = getattr(item, "funcargs", {}).get("benchmark") if uses_benchmark(item) else None
        if fixture is not None and (declared := declarations(item)):
            fixture.extra_info["perfgate"] = declared  # saved with the run: compare applies it
        return (yield)


def _stores_profiles(config: pytest.Config) -> bool:
    choice = config.getoption("--perf-store-profiles")
    return choice == "always" or (choice == "saved" and _saves(config))


def _saves(config: pytest.Config) -> bool:
    saving = bool(config.getoption("benchmark_save", None))
    return saving or bool(config.getoption("benchmark_autosave", None))


def _check_histogram(config: pytest.Config) -> None:
    if config.getoption("benchmark_histogram", None) and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError(
            "--benchmark-histogram needs pygal: pip install 'perfgate[histogram]' "
            "(or pip install pygal pygaljs)"
        )


def uses_cuda(config: pytest.Config) -> bool:
    """Whether this session benchmarks on CUDA, as the project's conftest answers (hookspec)."""
    return bool(config.hook.pytest_perfgate_uses_cuda(config=config))


def storage_key(config: pytest.Config) -> str:
    """The run's hardware key: the hardware, or for instruction counts their own key."""
    from perfgate import instructions_plugin
    from perfgate.measure import machine

    return instructions_plugin.storage_key(config) or machine.hardware_key(uses_cuda(config))
