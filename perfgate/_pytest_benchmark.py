"""The only module that touches pytest-benchmark's private attributes (pytest-benchmark 5.x).

Everything perfgate needs from its session and fixture goes through these small functions, so a
change in pytest-benchmark breaks here, where tests/test_pytest_benchmark.py notices.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from perfgate.benchmark import Run, run_from_json
from perfgate.fields import Field, kept, unserializable

DEFAULT_STORAGE = "file://./.benchmarks"  # pytest-benchmark's default --benchmark-storage


def _session(config: pytest.Config):
    return getattr(config, "_benchmarksession", None)


def disabled(config: pytest.Config) -> bool:
    """True when benchmarks only run once, untimed (--benchmark-disable, or under xdist)."""
    session = _session(config)
    return session is None or bool(session.disabled)


def machine_id(config: pytest.Config) -> str:
    """pytest-benchmark's machine folder name, e.g. ``Linux-CPython-3.12-64bit``."""
    return _session(config).machine_id


def config_of(fixture) -> pytest.Config | None:
    """The pytest config of the session a benchmark fixture belongs to (None for a stand-in):
    the fixture keeps its test item's ``warn`` to warn with."""
    item = getattr(getattr(fixture, "_warner", None), "__self__", None)
    return getattr(item, "config", None)


def set_timer(fixture, timer: Callable[[], float]) -> None:
    """Use ``timer`` for this benchmark case only (pytest-benchmark takes one for the session)."""
    fixture._timer = timer


def count_instead(fixture, count: Callable[..., object]) -> None:
    """Make ``fixture`` hand its benchmarked call to ``count(fn, args, kwargs, setup,
    teardown)``, which returns the call's result, instead of timing it: ``benchmark(...)``,
    ``benchmark.pedantic(...)`` and ``weave`` alike, still once per test (its public methods
    check that, then call these two). Pedantic's rounds and iterations are for timing: not
    passed on."""

    class Counted(type(fixture)):
        def _raw(self, function_to_benchmark, *args, **kwargs):
            return count(function_to_benchmark, args, kwargs, None, None)

        def _raw_pedantic(
            self,
            target,
            args=(),
            kwargs=None,
            setup=None,
            teardown=None,
            rounds=1,
            warmup_rounds=0,
            iterations=1,
        ):
            if iterations > 1 and setup:  # pytest-benchmark's own refusal, kept
                raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")
            return count(target, tuple(args), dict(kwargs or {}), setup, teardown)

    fixture.__class__ = Counted


def samples(fixture) -> list[float]:
    """The per-round seconds per call a fixture measured ([] when it did not time)."""
    metadata = getattr(fixture, "stats", None)
    return list(metadata.stats.data) if metadata is not None else []


def mark_not_timed(fixture, why: str = "profiled by perfgate") -> None:
    """A case perfgate ran another way than timing it (profiled; a count that failed, whose
    failure is the test's): no result, and no "fixture was not used" warning (pytest-benchmark
    warns at teardown when the fixture has no mode, an ERROR under ``filterwarnings = error``;
    its ``skipped`` flag is reset from the test's outcome, so it cannot say this)."""
    fixture._mode = why


def timed_names(config: pytest.Config) -> set[str]:
    """The full names of the cases this session timed so far (not the counted ones)."""
    results = _session(config).benchmarks
    return {r.fullname for r in results if r.extra_info.get(Field.MEASURE) != Field.INSTRUCTIONS}


def add_extra_info(config: pytest.Config, fullname: str, key: str, value: object) -> None:
    """Set ``extra_info[key]`` of a timed case, before pytest-benchmark writes the run."""
    for result in _session(config).benchmarks:
        if result.fullname == fullname:
            result.extra_info[key] = value


def result_count(config: pytest.Config) -> int:
    return len(_session(config).benchmarks)


def take_results_since(config: pytest.Config, start: int) -> Run:
    """The results recorded since ``start`` as a Run, removed from the session (a saved run holds
    one entry per benchmark: the first)."""
    return run_from_json(take_json_since(config, start), None)


def take_json_since(config: pytest.Config, start: int) -> dict:
    """``take_results_since`` as the run's JSON."""
    results = _session(config).benchmarks
    taken = results[start:]
    del results[start:]
    return _as_json(config, taken)


def current_run(config: pytest.Config) -> Run:
    """This session's results as a Run, through the same JSON a saved run holds."""
    return _as_run(config, _session(config).benchmarks)


def _as_run(config: pytest.Config, results: list) -> Run:
    return run_from_json(_as_json(config, results), None)


def _as_json(config: pytest.Config, results: list) -> dict:
    entries = [_entry(r) for r in results if r and not r.has_error]
    return {
        "machine_info": machine_info(config),
        "commit_info": {},
        "benchmarks": json.loads(json.dumps(entries, default=unserializable)),
        "datetime": datetime.now(timezone.utc).isoformat(),
    }


def session_json(config: pytest.Config) -> dict:
    """This session's run JSON as ``--benchmark-save`` writes it (per-round data included)."""
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    config.hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    output = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=_session(config).benchmarks,
        include_data=True,
        machine_info=machine_info(config),
        commit_info=commit_info,
    )
    config.hook.pytest_benchmark_update_json(
        config=config, benchmarks=_session(config).benchmarks, output_json=output
    )
    return json.loads(json.dumps(output, default=unserializable))


def time_under_xdist(config: pytest.Config) -> None:
    """Time the benchmarks of this pytest-xdist worker (pytest-benchmark turns itself off under
    xdist; perfgate gives each worker a device of its own and merges the workers' runs)."""
    session = _session(config)
    if session is not None and not config.getoption("benchmark_disable"):
        session.disabled = False
        session.xdist_warning = False


def _entry(result) -> dict:
    """A result's JSON entry with only the statistics the model reads: the kept rounds and the
    count measured. pytest-benchmark's own (mean and stddev through ``statistics``, seconds for
    200,000 rounds) are left to its table and save, and never computed for a re-run."""
    entry = result.as_dict(include_data=False, stats=False)
    data = result.stats.data
    entry["stats"] = {"data": kept(data), "rounds": len(data)}
    return entry


def machine_info(config: pytest.Config) -> dict:
    return _session(config).get_machine_info()


def show_comparison_with(config: pytest.Config, path: Path, entries: list[dict]) -> None:
    """Let pytest-benchmark's own table and --benchmark-compare-fail compare with the run at
    ``path``, its benchmark ``entries`` as the store read them (perfgate loads and checks
    baselines itself; pytest-benchmark is told to load nothing)."""
    session = _session(config)
    session.compare = str(path)
    try:  # pytest-benchmark names the compared run by its path inside the storage
        shown = Path(path).resolve().relative_to(Path(str(session.storage.path)))
    except ValueError:
        shown = Path(path)
    session.compared_mapping = {shown: {b["fullname"]: b for b in entries}}


def drop_unmeasured(config: pytest.Config) -> None:
    """Forget results with no round measured (a Ctrl-C in a case's first round): pytest-benchmark
    cannot compute their statistics, and would fail on them instead of saving the others."""
    session = _session(config)
    if session is not None:
        session.benchmarks[:] = [r for r in session.benchmarks if r.has_error or r.stats.data]


def save_nothing(config: pytest.Config) -> bool:
    """Where no result is left, have pytest-benchmark neither save nor write its JSON (it would
    warn "Not saving anything", a traceback under ``filterwarnings = error``); True if so."""
    session = _session(config)
    if (
        session is None
        or session.benchmarks
        or not (session.save or session.autosave or session.json)
    ):
        return False
    session.save = session.autosave = session.json = None
    return True


def drop_compare_fail(config: pytest.Config) -> None:
    """No baseline: --benchmark-compare-fail has nothing to check (and must not error)."""
    config.option.benchmark_compare_fail = []
    session = _session(config)
    if session is not None:
        session.compare_fail = []


def route_saving(
    config: pytest.Config,
    save: Callable[[dict, str], None],
    write_json: Callable[[dict], None] | None = None,
) -> None:
    """Have ``--benchmark-save`` call ``save(run_json, name)`` instead of pytest-benchmark's
    FileStorage.save (which checks for a free number, then writes: two saves can collide), and
    ``--benchmark-json`` call ``write_json(run_json)`` instead of its save_json (which leaves a
    half-written file, and a traceback, on a full disk)."""
    session = _session(config)
    session.storage.save = save
    if write_json is not None:
        session.save_json = write_json
