"""Where the commands find saved runs, and what a RUN argument names on the command line: a path
to a pytest-benchmark JSON file, or a run number (``3``, ``0003``) or a name fragment
(``h100-full``) in one hardware folder of the baseline store. Runs are read through
``perfgate.store`` only; a baseline's set is ``store.baseline``'s, the same choice as the pytest
plugin's, and the store's root is found by the plugin's rule (``store_root``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from perfgate import arguments, store
from perfgate.benchmark import Run
from perfgate.cli.project import setting_path
from perfgate.measure.machine import this_machine_key
from perfgate.report.common import matches as matches  # re-exported (cli.compare)
from perfgate.store.baseline import candidates, key_folder
from perfgate.store.baseline import set_of as baseline_set_of  # noqa: F401 (cli.compare)

RESULTS = Path("perfgate-results")  # where the commands write by default
PYTEST_BENCHMARK_STORAGE = Path(".benchmarks")  # its default --benchmark-storage, <machine id>/


@dataclass(frozen=True)
class StoreRoot:
    """The folder saved runs are under; ``per_hardware``: ``<path>/<hardware key>/<machine>/``,
    else pytest-benchmark's own storage, ``<path>/<machine id>/`` (another project's)."""

    path: Path
    per_hardware: bool = True


def store_root(given: str | None) -> StoreRoot:
    """The store's root, by the plugin's one rule: ``--baselines DIR``; else the project's ini
    setting ``perfgate_baselines`` (from the ini file's folder); else pytest-benchmark's own
    storage, ``.benchmarks`` in the working folder."""
    if given:
        return StoreRoot(Path(given).expanduser())
    configured = setting_path("perfgate_baselines")
    if configured is not None:
        return StoreRoot(configured)
    return StoreRoot(PYTEST_BENCHMARK_STORAGE.resolve(), per_hardware=False)


def add_where(parser: argparse.ArgumentParser) -> None:
    """``--baselines DIR`` and ``--hardware KEY``: where RUN arguments are looked up."""
    where = parser.add_argument_group("where saved runs are looked up")
    arguments.add_baselines(where.add_argument, "--baselines")
    where.add_argument("--hardware", metavar="KEY", help="hardware folder (default: this one)")


class Hardware:
    """The hardware folder RUN arguments are looked up in, found only when first needed
    (finding this machine's key imports torch)."""

    def __init__(self, baselines: str | None, key: str | None):
        self.root = store_root(baselines)
        self._key = key

    @property
    def folder(self) -> Path:
        if not self.root.per_hardware:
            return self.root.path
        if self._key is None:
            self._key = this_machine_key()
        return key_folder(self.root.path, self._key)

    def resolve(self, argument: str) -> Run:
        """The run a RUN argument names; an existing path needs no hardware folder."""
        if Path(argument).is_file():
            return store.load(Path(argument))
        return store.load(store.resolve(argument, self.folder, self.root.per_hardware))

    def runs(self) -> list[Run]:
        """The folder's runs, oldest first by recorded datetime; NoSuchRun when there are none."""
        runs = store.saved_runs(self.folder)
        if not runs:
            raise store.NoSuchRun(
                f"{store.no_runs_message(self.folder, self.root.per_hardware)}; "
                f"{store.SAVE_HINT}, pick another "
                "folder with --hardware KEY or --baselines DIR, or pass run files' paths"
            )
        return runs

    def newest(self, count: int, counted: bool | None = None) -> list[Run]:
        """The newest ``count`` runs that can be a baseline (none dated in the future, as the
        gate chooses: ``store.baseline.candidates``), oldest first; ``counted``: only counted
        runs (True) or only timed ones (False), which share pytest-benchmark's own folder."""
        self.runs()  # NoSuchRun, saying where, when the folder has no run at all
        runs = [r for r in candidates(self.folder) if counted is None or r.counted == counted]
        if len(runs) < count:
            some = "" if counted is None else f" ({kind(counted)})"
            raise store.NoSuchRun(
                f"only {len(runs)} saved run{some} in {self.folder}; name the runs to compare (a "
                f"path, or a run number such as 0001), or {store.SAVE_HINT}"
            )
        return runs[-count:]


def kind(counted: bool) -> str:
    """A run's kind in words: its cases counted (instructions) or timed."""
    return "counted" if counted else "timed"
