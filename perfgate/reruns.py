"""Running a session's test items again after the main loop: the gate's confirmation and
profiling re-runs, and the profiles stored with a saved run."""

from __future__ import annotations

import pytest


def run_again(session: pytest.Session, names: set[str]) -> None:
    """Run the items whose node ids are in ``names`` once more, in collection order."""
    items = [item for item in session.items if item.nodeid in names]
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else None
        item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
