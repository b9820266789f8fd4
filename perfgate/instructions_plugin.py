"""``--perf-measure instructions``: selects the host-overhead cases (tests marked
``instructions``), counts them all in three callgrind processes per session, and stores the runs
under their own key (``counters.hardware_key``). Without the option those cases are deselected.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from perfgate.measure import callgrind, callgrind_inject
from perfgate.measure import instructions as counters
from perfgate.session import GateCannotRun

INSTALL_HINT = "install it with `apt-get install valgrind` (Debian, Ubuntu)"


def measuring_instructions(config: pytest.Config) -> bool:
    return config.getoption("--perf-measure", "time") == "instructions"


def storage_key(config: pytest.Config) -> str | None:
    """The baseline folder key of an instruction-count run; None for a timed run."""
    return counters.hardware_key() if measuring_instructions(config) else None


def configure(config: pytest.Config) -> None:
    """Register this module's hooks; with --perf-gate, missing valgrind is a
    gate that cannot run (exit 6), because a gate that counts nothing must not pass."""
    if config.getoption("--perf-callgrind-repeats") < 2:
        raise pytest.UsageError("--perf-callgrind-repeats must be at least 2 (for the spread)")
    if config.getoption("--perf-callgrind-layouts") < 1:
        raise pytest.UsageError("--perf-callgrind-layouts must be at least 1")
    missing = callgrind.missing_tools()
    if measuring_instructions(config) and config.getoption("--perf-gate", False) and missing:
        raise GateCannotRun(
            f"--perf-measure instructions --perf-gate needs valgrind ({', '.join(missing)} "
            f"not found): {INSTALL_HINT}"
        )
    config.pluginmanager.register(sys.modules[__name__], "perfgate-instructions")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the instruction cases with --perf-measure instructions, none of them without;
    tests that are not benchmarks stay either way."""
    wanted = measuring_instructions(config)
    kept, dropped = [], []
    for item in items:
        is_case = item.get_closest_marker("instructions") is not None
        is_benchmark = "benchmark" in getattr(item, "fixturenames", ())
        (kept if is_case == wanted or not is_benchmark else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def instruction_counts(request: pytest.FixtureRequest) -> dict[str, dict]:
    """Every selected case counted, in --perf-callgrind-layouts processes per case module."""
    config = request.config
    if missing := callgrind.missing_tools():
        pytest.skip(f"instruction counts need valgrind ({', '.join(missing)} not found): "
                    f"{INSTALL_HINT}")  # fmt: skip
    items = [i for i in request.session.items if i.get_closest_marker("instructions")]
    by_module: dict[str, list[str]] = {}
    for item in items:
        by_module.setdefault(item.module.__name__, []).append(item.callspec.params["case"])
    results: dict[str, dict] = {}
    log = Path("perfgate-results") / f"callgrind-{os.getpid()}.log"  # one per session
    repeats = config.getoption("--perf-callgrind-repeats")
    layouts = config.getoption("--perf-callgrind-layouts")
    for module, cases in by_module.items():
        try:
            callgrind_inject.inject_fraction()  # a bad value fails here, before valgrind starts
            results.update(callgrind.measure(module, cases, repeats, config.rootpath, log, layouts))
        except (callgrind.CallgrindError, ValueError) as error:
            pytest.fail(str(error), pytrace=False)
    return results
