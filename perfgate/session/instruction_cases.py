"""``--perf-measure instructions``: every selected test that uses pytest-benchmark's ``benchmark``
fixture is counted instead of timed, whatever the project (choose them with ``-k`` or ``-m``).

At the first such test, all of them are counted at once (``counts``): a few callgrind processes
run pytest on them with this session's options (``child_args``), each counting every
``benchmark(...)`` and ``benchmark.pedantic(...)`` call (``session.counting``, inside valgrind).
Here the tests' bodies do not run: each one's counts are recorded in its benchmark fixture like
a timing (``record``) and stored under the instruction key (``storage_key``); a test that failed
or skipped in the counting process fails or skips here with its message.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark
from perfgate import options as perfgate_options
from perfgate.measure import callgrind, callgrind_inject, callgrind_requests
from perfgate.measure import instructions as counters
from perfgate.options import Options
from perfgate.session.baseline import GateCannotRun
from perfgate.session.declarations import uses_benchmark

INSTALL_HINT = "install it with `apt-get install valgrind` (Debian, Ubuntu)"
COUNTS = pytest.StashKey[dict]()  # test id -> its counts or outcome (``callgrind.measure``)


def storage_key(options: Options) -> str | None:
    """The baseline folder key of an instruction-count run; None for a timed run."""
    return counters.hardware_key() if options.instructions else None


def unavailable() -> str | None:
    """Why nothing can be counted on this machine, in one line; None when all is here."""
    if missing := callgrind.missing_tools():
        return f"instruction counts need valgrind ({', '.join(missing)} not found): {INSTALL_HINT}"
    try:
        callgrind_requests.build()
    except callgrind_requests.RequestsUnavailable as error:
        return f"instruction counts need {error}"
    return None


def check(options: Options) -> None:
    """With --perf-gate, a machine that cannot count is a gate that cannot run (exit 6),
    because a gate that counts nothing must not pass."""
    if options.instructions and options.gate and (reason := unavailable()):
        raise GateCannotRun(f"--perf-measure instructions --perf-gate: {reason}")


def record(item: pytest.Item, options: Options) -> None:
    """In place of ``item``'s body: its counted call recorded in its benchmark fixture, or the
    counting process's outcome (a failure, a skip) as this test's."""
    entry = counts(item.session, options).get(item.nodeid, {})
    if entry.get("outcome") == "skipped":
        pytest.skip(entry["message"])
    fixture = item.funcargs["benchmark"]
    if "per_call" not in entry:
        _pytest_benchmark.mark_not_timed(fixture, "not counted by perfgate")
        pytest.fail(entry.get("message", "not counted"), pytrace=False)
    if entry["group"] is not None:
        fixture.group = entry["group"]
    fixture.extra_info.update(entry["extra_info"])
    counters.record_instructions(fixture, entry)


def counts(session: pytest.Session, options: Options) -> dict[str, dict]:
    """Every benchmark test of the session counted, in --perf-callgrind-layouts processes (once
    per session); a test's entry is its outcome where it could not be counted."""
    config = session.config
    if COUNTS in config.stash:
        return config.stash[COUNTS]
    nodeids = [item.nodeid for item in session.items if uses_benchmark(item)]
    log = Path("perfgate-results") / f"callgrind-{os.getpid()}.log"  # one per session
    given = {name: os.environ[name] for name in options.callgrind_env if name in os.environ}
    spec = {
        "nodeids": nodeids,
        "args": child_args(config, nodeids),
        "repeats": options.callgrind_repeats,
        "environment": given,
    }
    found, otherwise = {}, {"outcome": "failed", "message": f"not counted; the log: {log}"}
    if reason := unavailable():
        otherwise = {"outcome": "skipped", "message": reason}
    else:
        try:
            callgrind_inject.inject_fraction()  # a bad value fails here, before valgrind starts
            library, layouts = callgrind_requests.build(), options.callgrind_layouts
            found = callgrind.measure(spec, config.rootpath, log, library, layouts)
        except (callgrind.CallgrindError, ValueError) as error:
            otherwise = {"outcome": "failed", "message": str(error)}
    config.stash[COUNTS] = {name: found.get(name, otherwise) for name in nodeids}
    return config.stash[COUNTS]


def child_args(config: pytest.Config, nodeids: list[str]) -> list[str]:
    """The counting processes' pytest arguments: this session's, without its test paths and
    perfgate's own options (paths of any length: the same count wherever a report goes), with
    --perf-measure instructions (for the project's own hooks), the tests to count (by id, from
    the folder ``src`` that links to the root), their own temporary folders and cache, and the
    root as rootdir."""
    given = [str(arg) for arg in config.invocation_params.args]
    paths = set(config.args) if config.args_source == pytest.Config.ArgsSource.ARGS else set()
    kept = [arg for arg in perfgate_options.without_own(given) if arg not in paths]
    # Under a project's `filterwarnings = error`, two warnings would stop the counting process:
    # pytest's "already imported, cannot be rewritten" (perfgate is imported before pytest) and
    # pytest-benchmark's "Not saving anything" at its end (--benchmark-save: nothing is timed).
    private = [
        "--perf-measure=instructions",
        "--rootdir=src",
        "--basetemp=tmp/pytest",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        "-W",
        "ignore::pytest_benchmark.logger.PytestBenchmarkWarning",
    ]
    if config.pluginmanager.has_plugin("cacheprovider"):  # else cache_dir is an unknown option
        private += ["-o", "cache_dir=$TMPDIR/pytest-cache"]
    return [*kept, *private, *(f"src/{nodeid}" for nodeid in nodeids)]
