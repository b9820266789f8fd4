"""``--perf-measure instructions``: the host-overhead cases (tests marked ``instructions``) are
selected (``select``), counted all at once in callgrind processes (``count``, behind the
``instruction_counts`` fixture of perfgate/plugin.py), and stored under their own key
(``counters.hardware_key``). Without the option those cases are deselected.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfgate.measure import callgrind, callgrind_inject
from perfgate.measure import instructions as counters
from perfgate.options import Options
from perfgate.session.baseline import GateCannotRun

INSTALL_HINT = "install it with `apt-get install valgrind` (Debian, Ubuntu)"


def storage_key(options: Options) -> str | None:
    """The baseline folder key of an instruction-count run; None for a timed run."""
    return counters.hardware_key() if options.instructions else None


def check(options: Options) -> None:
    """With --perf-gate, missing valgrind is a gate that cannot run (exit 6), because a gate
    that counts nothing must not pass."""
    missing = callgrind.missing_tools()
    if options.instructions and options.gate and missing:
        raise GateCannotRun(
            f"--perf-measure instructions --perf-gate needs valgrind ({', '.join(missing)} "
            f"not found): {INSTALL_HINT}"
        )


def select(config: pytest.Config, options: Options, items: list[pytest.Item]) -> None:
    """Keep only the instruction cases with --perf-measure instructions, none of them without;
    tests that are not benchmarks stay either way."""
    kept, dropped = [], []
    for item in items:
        is_case = item.get_closest_marker("instructions") is not None
        is_benchmark = "benchmark" in getattr(item, "fixturenames", ())
        (kept if is_case == options.instructions or not is_benchmark else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def count(request: pytest.FixtureRequest, options: Options) -> dict[str, dict]:
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
    repeats, layouts = options.callgrind_repeats, options.callgrind_layouts
    for module, cases in by_module.items():
        try:
            callgrind_inject.inject_fraction()  # a bad value fails here, before valgrind starts
            results.update(callgrind.measure(module, cases, repeats, config.rootpath, log, layouts))
        except (callgrind.CallgrindError, ValueError) as error:
            pytest.fail(str(error), pytrace=False)
    return results
