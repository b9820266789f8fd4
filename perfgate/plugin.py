"""The pytest plugin: wires options, fixtures and hooks to the perfgate modules, nothing more."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import warnings

import pytest
import torch

from perfgate import (
    _pytest_benchmark,
    baseline_session,
    gate,
    host_memory,
    instructions_plugin,
    machine,
    nvml,
    outputs,
    profiling,
    saving,
)
from perfgate.baseline_session import GATE_NOT_RUN, GateCannotRun, Saver
from perfgate.declarations import MARKER_HELP, declarations, uses_benchmark
from perfgate.timing import Budget, copy_bandwidth_gbps

TIERS = {
    # CI smoke: bodies run once under --benchmark-disable; if timed, very briefly
    "quick": Budget(round_seconds=0.002, case_seconds=0.1, min_rounds=3, max_rounds=10),
    # a developer's run: about a second per case, enough rounds for the statistics
    "default": Budget(round_seconds=0.01, case_seconds=1.0, min_rounds=10, max_rounds=100),
    # nightly GPU: every size, more rounds
    "full": Budget(round_seconds=0.01, case_seconds=1.5, min_rounds=15, max_rounds=200),
}

HOST_MALLOC = pytest.StashKey[str]()
# --perf-lock-clocks: the line shown in the header, and whether the clocks are locked
LOCKED_CLOCKS = pytest.StashKey[tuple[str, bool]]()
SAVER = pytest.StashKey[Saver]()
# pytest-benchmark options that the perfgate timers set per case from --perf-tier
# (and --benchmark-timer, which the saved run records all the same)
IGNORED_OPTIONS = ("--benchmark-min-rounds", "--benchmark-max-time", "--benchmark-min-time",
                   "--benchmark-timer")  # fmt: skip


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfgate", "perfgate benchmark matrix")
    group.addoption(
        "--device",
        choices=("cpu", "cuda", "all"),
        default="all",
        help="devices to benchmark: cpu, cuda, or all present (default: all; CPU always runs)",
    )
    group.addoption(
        "--perf-tier",
        choices=tuple(TIERS),
        default="default",
        help="size tier: quick (CI smoke), default, full (nightly GPU). Default: default",
    )
    group.addoption(
        "--perf-profile",
        default=None,
        metavar="DIR",
        help="profile each selected case with torch.profiler instead of timing it: writes "
        "DIR/<test>.txt (top operators) and DIR/<test>.trace.json (Chrome trace)",
    )
    group.addoption(
        "--perf-store-profiles",
        choices=("saved", "always", "never"),
        default="saved",
        help="store a compact torch.profiler profile (kernel times, allocations) with each timed "
        "case, taken after the whole session has been timed, so the gate can say which kernels "
        "a later regression changed: saved (default: runs saved with --benchmark-save or "
        "--benchmark-autosave), always (also --benchmark-json), never",
    )
    group.addoption(
        "--perf-malloc",
        choices=("retain", "default"),
        default="retain",
        help="host allocator for CPU benchmarks: retain (glibc keeps freed memory, so calls do "
        "not page-fault their temporaries in again; steadier CPU timings) or default (glibc as "
        "configured). Default: retain",
    )
    group.addoption(
        "--perf-lock-clocks",
        action="store_true",
        help="lock the GPU clocks at base through NVML for the session and reset them after "
        "(needs perfgate[gpu] and root; where not allowed, says so and goes on). Default: off",
    )
    baseline_session.add_options(group)
    gate.add_options(group)
    instructions_plugin.add_options(group)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads its storage and compare options
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if config.getoption("--perf-profile"):
        profiling.set_profile_dir(config.getoption("--perf-profile"))
    profiling.collected.clear()
    profiling.profilable.clear()
    config.stash[HOST_MALLOC] = host_memory.DEFAULT
    if config.getoption("--perf-lock-clocks") and not hasattr(config, "workerinput"):
        line, undo = nvml.lock_base_clocks_for_session()
        config.stash[LOCKED_CLOCKS] = (line, undo is not None)
        if undo is not None:
            config.add_cleanup(undo)
    if not _pytest_benchmark.active(config):
        return  # -p no:benchmark
    _warn_ignored_options(config)
    _check_histogram(config)
    outputs.check_session_outputs(config)
    saving.interrupt_on_sigterm(config)
    if _stores_profiles(config):
        config.pluginmanager.register(profiling.ProfileStore(config), "perfgate-profile-store")
    try:
        _configure_store_and_gate(config)
    except GateCannotRun as error:
        pytest.exit(f"perfgate gate cannot run: {error}", returncode=GATE_NOT_RUN)


def _configure_store_and_gate(config: pytest.Config) -> None:
    use_gate = config.getoption("--perf-gate")
    devices = selected_devices(config)
    if use_gate and devices == ["cuda"] and not torch.cuda.is_available():
        raise GateCannotRun("--device cuda: no CUDA device on this machine, nothing to gate")
    if use_gate and (
        getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput")
    ):
        raise GateCannotRun(
            "pytest-xdist (-n) is on, and pytest-benchmark does not time under xdist: "
            "run the gate without -n"
        )
    thresholds = gate.thresholds_from(config) if use_gate else None  # usage errors first
    instructions_plugin.configure(config)
    key = storage_key(config)
    choice = baseline_session.choose(config, key, use_gate)
    saver = config.stash[SAVER] = Saver(config, choice, key)
    if use_gate:
        session = gate.GateSession(config, choice, saver, thresholds)
        config.pluginmanager.register(session, "perfgate-gate")


@pytest.hookimpl(trylast=True)  # pytest-benchmark's session exists by now
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if SAVER not in config.stash:
        return
    saver = config.stash[SAVER]
    saver.session = session
    _pytest_benchmark.route_saving(config, saver)
    if saver.choice.baseline is not None:
        _pytest_benchmark.show_comparison_with(config, saver.choice.baseline.path)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # before pytest-benchmark saves and shows results
def pytest_sessionfinish(session: pytest.Session):
    if SAVER in session.config.stash:
        _pytest_benchmark.drop_unmeasured(session.config)
    return (yield)


def _stores_profiles(config: pytest.Config) -> bool:
    choice = config.getoption("--perf-store-profiles")
    saving = bool(config.getoption("benchmark_save", None))
    saving = saving or bool(config.getoption("benchmark_autosave", None))
    return choice == "always" or (choice == "saved" and saving)


def _warn_ignored_options(config: pytest.Config) -> None:
    given = [a.split("=")[0] for a in config.invocation_params.args if isinstance(a, str)]
    for option in IGNORED_OPTIONS:
        if option in given:
            why = "read CUDA events or their own clock" if option == "--benchmark-timer" else (
                "set their rounds and round length from --perf-tier")  # fmt: skip
            warnings.warn(f"perfgate: {option} is ignored by cases timed with perfgate.timing, "
                          f"which {why}", stacklevel=1)  # fmt: skip


def _check_histogram(config: pytest.Config) -> None:
    if config.getoption("benchmark_histogram", None) and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError(
            "--benchmark-histogram needs pygal: pip install 'perfgate[histogram]' "
            "(or pip install pygal pygaljs)"
        )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep freed host memory only for sessions that run benchmarks (not in every pytest run
    of a project that merely has perfgate installed)."""
    wanted = "cpu" in selected_devices(config) and config.getoption("--perf-malloc") == "retain"
    if wanted and any(uses_benchmark(item) for item in items):
        config.stash[HOST_MALLOC] = host_memory.retain_freed_memory()


def storage_key(config: pytest.Config) -> str:
    """The baseline folder's key: the hardware, or for instruction counts their own key."""
    use_cuda = "cuda" in selected_devices(config) and torch.cuda.is_available()
    return instructions_plugin.storage_key(config) or machine.hardware_key(use_cuda)


def selected_devices(config: pytest.Config) -> list[str]:
    """Device names the matrix runs on: CPU always for 'all', CUDA when present or asked for."""
    choice = config.getoption("--device")
    if choice == "cpu":
        return ["cpu"]
    if choice == "cuda":
        return ["cuda"]
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``bench_device`` with the selected devices, jointly with tiered sizes.

    A benchmark module may declare ``TIERED_PARAMETERS = {name: {(device, tier): [values]}}``:
    a test using ``name`` gets, for each device, the values of that device and --perf-tier.
    """
    if "bench_device" not in metafunc.fixturenames:
        return
    tier = metafunc.config.getoption("--perf-tier")
    tiered = getattr(metafunc.module, "TIERED_PARAMETERS", {})
    names = [name for name in tiered if name in metafunc.fixturenames]
    cases = []
    for device in selected_devices(metafunc.config):
        value_lists = [tiered[name].get((device, tier), []) for name in names]
        cases += [(device, *values) for values in itertools.product(*value_lists)]
    metafunc.parametrize(["bench_device", *names], cases, ids=_case_id, indirect=["bench_device"])


def _case_id(value: object) -> str:
    if isinstance(value, tuple | list):
        return "x".join(map(str, value))
    return str(value)


@pytest.fixture(scope="session")
def bench_device(request: pytest.FixtureRequest) -> torch.device:
    """The device a benchmark runs on (parametrized by --device); skips CUDA when absent."""
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("--device cuda: no CUDA device is available on this machine")
    return torch.device(request.param)


@pytest.fixture(scope="session")
def perf_tier(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--perf-tier")


@pytest.fixture(scope="session")
def perf_budget(perf_tier: str) -> Budget:
    return TIERS[perf_tier]


@pytest.fixture(scope="session")
def copy_roofline():
    """``copy_roofline(total_bytes, device)``: measured copy GB/s for that many bytes, cached."""
    measured: dict[tuple[int, str], float] = {}

    def copy_roofline(total_bytes: int, device: torch.device) -> float:
        key = (total_bytes, str(device))
        if key not in measured:
            measured[key] = copy_bandwidth_gbps(total_bytes, device)
        return measured[key]

    return copy_roofline


def pytest_report_header(config: pytest.Config) -> str | None:
    return config.stash[LOCKED_CLOCKS][0] if LOCKED_CLOCKS in config.stash else None


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    use_cuda = "cuda" in selected_devices(config) and torch.cuda.is_available()
    machine_info["perfgate"] = {
        "hardware_key": storage_key(config),
        "software": machine.software_versions(),
        "gpu_health": machine.gpu_health() if use_cuda else {"available": False},
        "tier": config.getoption("--perf-tier"),
        "host_malloc": config.stash.get(HOST_MALLOC, host_memory.DEFAULT),
        "clocks_locked": config.stash.get(LOCKED_CLOCKS, ("", False))[1],
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _skip_on_out_of_memory():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    fixture = getattr(item, "funcargs", {}).get("benchmark") if uses_benchmark(item) else None
    if fixture is not None and (declared := declarations(item)):
        fixture.extra_info["perfgate"] = declared  # saved with the run: compare applies it too
    with _skip_on_out_of_memory():
        return (yield)


@contextlib.contextmanager
def _skip_on_out_of_memory():
    """Turns an out-of-memory error into a skip with the reason, so the matrix goes on."""
    try:
        yield
    except torch.OutOfMemoryError as error:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        reason = str(error).splitlines()[0] if str(error) else "out of memory"
        pytest.skip(f"out of memory for this parameter: {reason}")
