"""The passes after a session's main loop that run its test items again: the gate's confirmation
and profiling re-runs, the launch counts of wall-timed CUDA cases (``count_launches``) and the
profiles stored with a saved run (``store_profiles``). The re-runs are not reported as tests
(the session's counts stay those of the main loop); their failures are returned.

Each case is timed, counted or profiled by ``measure``; here only which items run again, in
which mode, and where their results go. Counting and profiling come after every timing: a CUDA
profiler session leaves CUPTI attached, which slows every later launch (pytorch/pytorch#144455).
"""

from __future__ import annotations

import time

import pytest
from _pytest.runner import runtestprotocol

from perfgate import _pytest_benchmark
from perfgate.fields import Field
from perfgate.measure import launch_counts
from perfgate.measure.mode import Mode


def say(config: pytest.Config, line: str) -> None:
    """One bold line in pytest's terminal: what a pass after the main loop is doing."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, bold=True)


def run_again(session: pytest.Session, names: set[str]) -> list[str]:
    """Run the items whose node ids are in ``names`` once more, in collection order; the node
    ids of those that failed."""
    items = [item for item in session.items if item.nodeid in names]
    failed = []
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else None
        reports = runtestprotocol(item, log=False, nextitem=following)
        if any(report.failed for report in reports):
            failed.append(item.nodeid)
    return failed


def _run_results_dropped(session: pytest.Session, names: set[str]) -> list[str]:
    """``run_again``, keeping none of the results pytest-benchmark records meanwhile (a case
    that is timed anyway must not join the run)."""
    start = _pytest_benchmark.result_count(session.config)
    try:
        return run_again(session, names)
    finally:
        _pytest_benchmark.take_results_since(session.config, start)


def count_launches(session: pytest.Session, mode: Mode, names: set[str]) -> dict[str, dict]:
    """Run the named countable cases again in counting mode (``measure.launch_counts``); set
    their ``extra_info`` counts in the session's results and return them (name -> counts)."""
    config = session.config
    names = names & mode.countable
    if not names:
        return {}
    say(config, f"perfgate: counting the launches of {len(names)} wall-timed CUDA cases")
    with mode.switched(counting=True):
        _run_results_dropped(session, names)
    counts = {name: mode.counts[name] for name in names if name in mode.counts}
    for name, value in counts.items():
        _pytest_benchmark.add_extra_info(config, name, launch_counts.KEY, value)
    return counts


def store_profiles(session: pytest.Session, mode: Mode) -> None:
    """Store a compact profile (``measure.profiler``) with every case this session timed, for a
    run that is saved: the timed cases run once more, profiled instead of timed, and their
    profiles go to pytest-benchmark's results before it writes the run."""
    config = session.config
    timed = _pytest_benchmark.timed_names(config) & mode.profilable
    if not timed:
        return
    say(config, f"perfgate: profiling {len(timed)} timed cases to store with the run")
    start = time.perf_counter()
    with mode.switched(collecting=True):
        failed = _run_results_dropped(session, timed)
    stored = timed & set(mode.profiles)
    for name in stored:
        _pytest_benchmark.add_extra_info(config, name, Field.PROFILE, mode.profiles[name])
    say(config, f"perfgate: {len(stored)} profiles stored in {time.perf_counter() - start:.0f} s")
    if failed:
        say(
            config,
            f"perfgate: no profile for {len(failed)} cases that failed "
            f"when run again under the profiler: {', '.join(failed)}",
        )
