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
from perfgate.fields import Field, RunField
from perfgate.format import terminal

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
    if spec := options.counting_spec():  # a callgrind counting process: it counts, nothing else
        from perfgate.session.counting import CountingSession

        config.pluginmanager.register(Counting(CountingSession(config, spec)))
        return
    if not options.asked(config):
        return
    if not hasattr(config.option, "benchmark_storage"):  # -p no:benchmark
        if options.read(config).gate:
            pytest.exit(
                "perfgate gate cannot run: pytest-benchmark is not loaded (-p no:benchmark); "
                "run the gate without it",
                returncode=GATE_NOT_RUN,
            )
        return
    from perfgate.session.baseline import GateCannotRun

    try:
        config.pluginmanager.register(Asked(config), "perfgate-asked")
    except GateCannotRun as error:
        pytest.exit(f"perfgate gate cannot run: {terminal(error)}", returncode=GATE_NOT_RUN)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on CUDA: one worker per GPU, each timing on its own (session.workers)."""
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


class Counting:
    """The hooks of a callgrind counting process (``session.counting``): only the given tests,
    each one's benchmarked call counted instead of timed, every outcome written for the parent."""

    def __init__(self, counting):
        self.counting = counting

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        self.counting.keep(config, items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        self.counting.prepare(item)
        result = yield
        self.counting.finished(item)
        return result

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.counting.report(report)

    def pytest_sessionfinish(self) -> None:
        self.counting.write()


class Asked:
    """The hooks of a session that asked for perfgate: store, compare, save, gate, profiles.
    Each calls plain code; the session's state is ``session.state.SessionState``, in the stash."""

    def __init__(self, config: pytest.Config):

        self.config = config
        self.state = start(config, uses_cuda(config))

    @pytest.hookimpl(trylast=True)  # pytest-benchmark's session exists by now
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.state.worker is not None:
            self.state.worker.start()  # time under xdist
        self.state.start_session(session)

    def pytest_report_header(self) -> str | None:
        return self.state.header()

    @pytest.hookimpl(optionalhook=True, tryfirst=True)  # a project's own hook adds to it after
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict):
        machine_info[RunField.PERFGATE] = self.state.machine_info(uses_cuda(config))

    @pytest.hookimpl(trylast=True)  # after -k / -m deselection
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        """The one order of selection: a worker's ratio groups written for the scheduler
        (xdist), this shard's part, the gate's check."""
        state = self.state
        if state.worker is not None:
            state.worker.write_groups(items)
        if state.shard is not None:
            state.shard.select(config, items)
        if state.gate is not None:
            state.gate.check(items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        from perfgate.session.interrupts import loop_ended

        stopped = False
        try:
            result = yield
            after_loop(self.state, session)
            return result
        except KeyboardInterrupt:
            stopped = True
            raise
        finally:
            controller = self.state.controller
            loop_ended(self.config, stopped, controller is not None and controller.measured())
            if self.state.interrupts is not None:  # nothing left to stop: save and report first
                self.state.interrupts.hold(session)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        from perfgate.measure import plain_profile
        from perfgate.session.declarations import declarations, uses_benchmark

        fixture = getattr(item, "funcargs", {}).get("benchmark") if uses_benchmark(item) else None
        if fixture is None:
            return (yield)
        if declared := declarations(item):
            fixture.extra_info[Field.DECLARATIONS] = declared  # saved: compare applies it
        plain_profile.prepare(fixture, self.state.mode)  # profiled instead, while profiling
        result = yield
        plain_profile.note(fixture, self.state.mode)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """--perf-measure instructions: a benchmark test's body ran in the counting processes;
        here its counts are recorded instead (session.instruction_cases)."""
        from perfgate.session import instruction_cases
        from perfgate.session.declarations import uses_benchmark

        if not self.state.options.instructions or not uses_benchmark(pyfuncitem):
            return None
        instruction_cases.record(pyfuncitem, self.state.options)
        return True

    @pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables: the verdicts end the output
    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = self.state.gate.summary() if self.state.gate is not None else []
        if lines:
            terminalreporter.section("perfgate gate")
            for line in lines:
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)  # after pytest-benchmark saved this process's run
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker sends its run; the controller saves the merged run (as pytest-benchmark
        saved before this hook without xdist); then the gate sets the exit status."""
        state = self.state
        if state.worker is not None:
            state.worker.send_run(state.shard)
        if state.controller is not None:
            state.controller.save(session, state.saver, state.options.gate)
        if state.gate is not None:
            state.gate.exit_status(session)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        from perfgate.session import workers

        controller = self.state.controller
        return None if controller is None else workers.scheduler(config, log, controller.groups)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        if self.state.controller is not None:
            self.state.controller.configure_node(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        if self.state.controller is not None:
            self.state.controller.node_down(node)


def after_loop(state, session: pytest.Session) -> None:
    """The passes after the main loop, in their one order. With the gate: judge -> re-run what
    looks slower (confirmation) -> count the launches of wall-timed CUDA cases -> profile what
    is confirmed -> conclude (verdicts, reports); without it, a saved run's launch counts. Then,
    for a saved run, the profiles stored with it. Counting and profiling come after every timing
    (they leave CUPTI attached, which slows later launches); nothing runs after failed tests."""
    from perfgate import _pytest_benchmark
    from perfgate.session import reruns

    if session.testsfailed or session.shouldfail or session.shouldstop:
        if state.gate is not None:
            state.gate.not_run()
        return
    gate = state.gate
    if gate is not None and (current := gate.current(session)) is not None:
        confirmation = gate.confirm(session, current)
        current = gate.count_launches(session, current, confirmation)
        current = gate.profile_confirmed(session, current, confirmation)
        gate.conclude(current, confirmation)
    elif gate is None and state.options.saves:
        timed = _pytest_benchmark.timed_names(session.config)
        reruns.count_launches(session, state.mode, timed)
    if state.options.stores_profiles:
        reruns.store_profiles(session, state.mode)


def uses_cuda(config: pytest.Config) -> bool:
    """Whether this session benchmarks on CUDA, as the project's conftest answers (hookspec)."""
    return bool(config.hook.pytest_perfgate_uses_cuda(config=config))


def start(config: pytest.Config, use_cuda: bool):
    """Check and decide what can be before the first benchmark runs (usage errors, outputs, the
    baseline: a missing one costs a second, not a GPU run); the state, kept in the stash."""
    from perfgate.measure import machine, nvml
    from perfgate.measure import mode as measure_mode
    from perfgate.session import baseline, instruction_cases, outputs, sharding, workers
    from perfgate.session.interrupts import Interrupts
    from perfgate.session.saver import Saver
    from perfgate.session.state import KEY, SessionState
    from perfgate.verdict.thresholds import parse_thresholds

    options.check_given_apart(config)  # `--perf-baselines DIR` moved pytest's rootdir
    times_here = workers.times_here(config)  # asked before a worker turns its saving off
    timing_gpu = workers.timing_gpu(config, use_cuda)  # the GPU read and locked: gwK's is K
    worker, controller = workers.configure(config, use_cuda)  # -n: merge (xdist)
    read = options.read(config)  # after a worker turned its saving off: the controller saves
    clocks = ("", False)
    if read.lock_clocks and times_here:
        line, undo = nvml.lock_base_clocks_for_session()
        clocks = (line, undo is not None)
        if undo is not None:
            config.add_cleanup(undo)
    mode = config.stash[measure_mode.KEY] = measure_mode.Mode(profile_dir=read.profile)
    _check_histogram(config)
    outputs.check_session_outputs(config, read)
    interrupts = Interrupts(config)
    interrupts.start()
    thresholds = parse_thresholds(read.thresholds) if read.gate else None
    instruction_cases.check(read)
    key = instruction_cases.storage_key(read) or machine.hardware_key(use_cuda)
    choice = baseline.choose(config, key, read)
    saver = Saver(config, choice, key)
    shard = sharding.selection(read.shard, choice.key_folder)  # a usage error for a bad value
    state = SessionState(config, read, key, choice, saver, mode, clocks, shard, worker, controller,
                         gpu=timing_gpu, interrupts=interrupts)  # fmt: skip
    if read.gate:
        state.gate = workers.new_gate(
            worker, controller, config, read, choice, saver, thresholds, mode, shard
        )
    config.stash[KEY] = state
    return state


def _check_histogram(config: pytest.Config) -> None:
    if config.getoption("benchmark_histogram", None) and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError(
            "--benchmark-histogram needs pygal: pip install 'perfgate[histogram]' "
            "(or pip install pygal pygaljs)"
        )
