"""This repository's benchmark suite as a pytest plugin (loaded by the root conftest.py): its own
options (--device, --perf-tier, --perf-malloc), fixtures, tiers and host allocator. None of it is
installed with perfgate: a project that installs perfgate gets only perfgate's ``--perf-*``
gate options, and keeps its own ``--device``.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings

import pytest
import torch

from perf_tests import options
from perfgate.measure import host_memory
from perfgate.measure.timing import Budget, copy_bandwidth_gbps
from perfgate.session.declarations import uses_benchmark

TIERS = {
    # CI smoke: bodies run once under --benchmark-disable; if timed, very briefly
    "quick": Budget(round_seconds=0.002, case_seconds=0.1, min_rounds=3, max_rounds=10),
    # a developer's run: about a second per case, enough rounds for the statistics
    "default": Budget(round_seconds=0.01, case_seconds=1.0, min_rounds=10, max_rounds=100),
    # nightly GPU: every size, more rounds
    "full": Budget(round_seconds=0.01, case_seconds=1.5, min_rounds=15, max_rounds=200),
}
HOST_MALLOC = pytest.StashKey[str]()
GATE_NOT_RUN = 6  # perfgate's exit status for a gate that cannot run
# pytest-benchmark options that the perfgate timers set per case from --perf-tier
# (and --benchmark-timer, which the saved run records all the same)
IGNORED_OPTIONS = ("--benchmark-min-rounds", "--benchmark-max-time", "--benchmark-min-time",
                   "--benchmark-timer")  # fmt: skip


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[HOST_MALLOC] = host_memory.DEFAULT
    if config.getoption("--perf-gate", False) and selected_devices(config) == ["cuda"]:
        if not torch.cuda.is_available():
            pytest.exit(
                "perfgate gate cannot run: --device cuda: no CUDA device on this machine, "
                "nothing to gate",
                returncode=GATE_NOT_RUN,
            )
    given = [a.split("=")[0] for a in config.invocation_params.args if isinstance(a, str)]
    for option in IGNORED_OPTIONS:
        if option in given:
            why = "read CUDA events or their own clock" if option == "--benchmark-timer" else (
                "set their rounds and round length from --perf-tier")  # fmt: skip
            warnings.warn(f"perf_tests: {option} is ignored by cases timed with perfgate's timing, "
                          f"which {why}", stacklevel=1)  # fmt: skip


def pytest_perfgate_uses_cuda(config: pytest.Config) -> bool:
    return "cuda" in selected_devices(config) and torch.cuda.is_available()


@pytest.hookimpl(optionalhook=True)  # -p no:benchmark: a hook nobody calls
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """The tier and allocator of this run, beside perfgate's machine info (its hook runs first)."""
    facts = machine_info.setdefault("perfgate", {})
    facts["tier"] = config.getoption("--perf-tier")
    facts["host_malloc"] = config.stash.get(HOST_MALLOC, host_memory.DEFAULT)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the cases marked ``instructions`` (test_host_overhead.py: counted, never timed) out
    of timed runs; keep freed host memory only for sessions that run benchmarks."""
    if config.getoption("--perf-measure", "time") != "instructions":
        counted_only = [item for item in items if item.get_closest_marker("instructions")]
        if counted_only:
            config.hook.pytest_deselected(items=counted_only)
            items[:] = [item for item in items if not item.get_closest_marker("instructions")]
    wanted = "cpu" in selected_devices(config) and config.getoption("--perf-malloc") == "retain"
    if wanted and any(uses_benchmark(item) for item in items):
        config.stash[HOST_MALLOC] = host_memory.retain_freed_memory()


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _skip_on_out_of_memory():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
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
