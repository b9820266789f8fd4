"""The one baseline choice, for the plugin and the CLI alike: the hardware folder of a root and
key, the run compared against (the baseline), and its baseline set.

A baseline set is the baseline and the runs saved just before it under the same name, in the
same environment (at most ``MAX_SET_RUNS``); a run dated in the future is never a baseline.
"""

from __future__ import annotations

from pathlib import Path

from perfgate import store
from perfgate.benchmark import Run
from perfgate.store import schema

MAX_SET_RUNS = 5


def key_folder(root: Path, key: str) -> Path:
    """The hardware folder of ``key`` under a baseline root: ``<root>/<key>``."""
    return Path(root) / key


def choose(
    wanted: object, folder: Path, no_runs: str | None = None, counted: bool | None = None
) -> tuple[Run, list[Run]]:
    """The baseline and its set (oldest first): the run that ``wanted`` names (a path, a run
    number or a name fragment in ``folder``), or the newest run of ``folder`` when ``wanted`` is
    empty or True. ``no_runs``: the message when the folder has none (NoSuchRun). ``counted``:
    only counted runs (True) or only timed ones (False) are chosen or join a set: both share
    pytest-benchmark's own folder, where no baseline root sorts them by key.

    A run outside ``folder`` is a set of one; a run dated in the future is a StoreError.
    """
    runs = [run for run in candidates(folder) if counted is None or run.counted == counted]
    if not wanted or wanted is True:
        if not runs:
            raise store.NoSuchRun(no_runs or f"{store.no_runs_message(folder)}; {store.SAVE_HINT}")
        return runs[-1], members(runs[-1], runs)
    baseline = store.load(store.resolve(str(wanted), folder))
    if schema.from_the_future(baseline):
        raise store.StoreError(store.future_message(baseline))
    return baseline, set_in(baseline, runs)


def candidates(folder: Path) -> list[Run]:
    """The runs of a hardware folder that can be a baseline, oldest first: every saved run but
    those dated in the future."""
    return [run for run in store.saved_runs(folder) if not schema.from_the_future(run)]


def set_of(run: Run) -> list[Run]:
    """``run``'s baseline set when it lies in a hardware folder (``<key>/<machine id>/NNNN_*``),
    else just ``run``; only runs of its kind (counted or timed) join it, as in ``choose``."""
    if run.path is None or not store.RUN_FILE.match(run.path.name):
        return [run]
    runs = candidates(run.path.parent.parent)
    return set_in(run, [r for r in runs if r.counted == run.counted])


def set_in(run: Run, runs: list[Run]) -> list[Run]:
    """``run``'s baseline set among ``runs`` (oldest first); just ``run`` when it is not one of
    them."""
    path = run.path.resolve() if run.path else None
    match = [r for r in runs if path is not None and r.path.resolve() == path]
    return members(match[0], runs) if match else [run]


def members(run: Run, runs: list[Run]) -> list[Run]:
    """``run`` and the runs saved just before it (in ``runs``, oldest first) under the same name
    and in the same environment, oldest first, at most MAX_SET_RUNS.

    Saving a baseline several times in a row (``--benchmark-save=cpu-default`` three times) makes
    a set, from which the gate learns how much the machine's sessions differ; another name, or
    a run in another environment, ends the set.
    """
    at = (schema.recorded_at(run), _number(run))
    earlier = [r for r in runs if (schema.recorded_at(r), store.number_of(r.path)) < at]
    chosen = [run]
    for candidate in reversed(earlier):
        if len(chosen) == MAX_SET_RUNS or candidate.name != run.name:
            break
        if candidate.environment != run.environment:
            break
        chosen.insert(0, candidate)
    return chosen


def _number(run: Run) -> int:
    return store.number_of(run.path) if run.path else 1 << 30
