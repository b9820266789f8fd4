"""Running a session's test items again after the main loop: the gate's confirmation and
profiling re-runs, and the profiles stored with a saved run. The re-runs are not reported as
tests (the session's counts stay those of the main loop); their failures are returned."""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol


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
