"""The pytest session inside a callgrind counting process (``measure.callgrind_child``): it runs
only the tests it was given, hands each one's benchmarked call to ``callgrind_child.Counter``
instead of timing it, and writes every test's counts or outcome to ``results.json`` for the
parent (``measure.callgrind.measure``). Nothing is timed, gated or saved here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark
from perfgate.measure.callgrind import RESULTS_FILE
from perfgate.measure.callgrind_inject import inject_fraction, injects_into
from perfgate.measure.callgrind_requests import LIBRARY_NAME, Requests
from perfgate.measure.target import Target

NOT_COLLECTED = (
    "not collected in the counting process, which collects with this session's options "
    "(its log is in perfgate-results/)"
)
NOT_CALLED = "its test made no benchmark(...) or benchmark.pedantic(...) call to count"


class CountingSession:
    """One counting process's tests and what became of each (``results``)."""

    def __init__(self, config: pytest.Config, spec: str):
        from perfgate.measure.callgrind_child import Counter

        data = json.loads(Path(spec).read_text())
        self.out = Path(data["out"])
        self.results: dict[str, dict] = {
            nodeid: {"outcome": "failed", "message": NOT_COLLECTED} for nodeid in data["nodeids"]
        }
        self.ended: set[str] = set()  # tests whose outcome is a failure or a skip
        self.lines: list[str] = []  # how long each count took, for the log
        requests = Requests(self.out / LIBRARY_NAME)
        self.counter = Counter(requests, self.out, data["repeats"])
        self.inject = inject_fraction()
        if hasattr(config.option, "dist"):  # pytest-xdist: the tests run here, in this process
            config.option.dist = "no"

    def keep(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Only the tests to count (their ids given as paths may collect more with -k unset)."""
        kept = [item for item in items if item.nodeid in self.results]
        dropped = [item for item in items if item.nodeid not in self.results]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
        for item in kept:
            self.results[item.nodeid] = {"outcome": "failed", "message": NOT_CALLED}

    def prepare(self, item: pytest.Item) -> None:
        """Before the test's body: its benchmark fixture counts instead of timing."""
        fixture = item.funcargs.get("benchmark")
        if fixture is None:
            return

        def count(fn, args, kwargs, setup, teardown):
            inject = self.inject if injects_into(item.nodeid) else 0.0
            start, cpu = time.perf_counter(), time.process_time()
            found, result = self.counter.count(Target(fn, args, kwargs, setup, teardown), inject)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            self.lines.append(
                f"{item.nodeid} counted in {seconds:.1f} s ({cpu:.1f} s CPU; "
                f"{found['calls']} calls a repeat, each "
                f"{found['cpu_seconds'] * 1e3:.3f} ms CPU)"
            )
            self.results[item.nodeid] = {
                **found,
                "group": fixture.group,
                "extra_info": _plain(fixture.extra_info),
            }
            return result

        _pytest_benchmark.count_instead(fixture, count)

    def finished(self, item: pytest.Item) -> None:
        """After the test's body: the group and extra_info it set after its call, too."""
        fixture, entry = item.funcargs.get("benchmark"), self.results.get(item.nodeid, {})
        if fixture is not None and "dumps" in entry:
            entry.update(group=fixture.group, extra_info=_plain(fixture.extra_info))

    def report(self, report: pytest.TestReport) -> None:
        """A counted test's first failure or skip (setup, call or teardown), as its outcome."""
        if report.nodeid not in self.results or report.passed or report.nodeid in self.ended:
            return
        self.ended.add(report.nodeid)
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
            self.results[report.nodeid] = {
                "outcome": "skipped",
                "message": str(reason).removeprefix("Skipped: "),
            }
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        text = crash.message if crash is not None else report.longreprtext
        first = next((line for line in text.splitlines() if line.strip()), "no message")
        self.results[report.nodeid] = {
            "outcome": "failed",
            "message": f"failed in the counting process ({report.when}): {first}",
        }

    def write(self) -> None:
        """The results for the parent, and how long each count took for the log (printed at
        the end: pytest captures what a test prints)."""
        (self.out / RESULTS_FILE).write_text(json.dumps(self.results))
        for line in self.lines:
            print(f"perfgate callgrind: {line}", flush=True)


def _plain(info: dict) -> dict:
    """``extra_info`` as JSON values (what pytest-benchmark would save of it)."""
    return json.loads(json.dumps(info, default=str))
