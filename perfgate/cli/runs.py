"""What a RUN argument names on the command line: a path to a pytest-benchmark JSON file, or a
run number (``3``, ``0003``) or a name fragment (``h100-full``) in one hardware folder of the
baseline store. Runs are read through ``perfgate.store`` only; a baseline's set is
``store.baseline``'s, the same choice as the pytest plugin's."""

from __future__ import annotations

from pathlib import Path

from perfgate import store
from perfgate.benchmark import Run
from perfgate.report.common import matches as matches  # re-exported (cli.compare)
from perfgate.store.baseline import candidates, key_folder, this_machine_key
from perfgate.store.baseline import set_of as baseline_set_of  # noqa: F401 (cli.compare)

PYTEST_BENCHMARK_STORAGE = Path(".benchmarks")  # its default --benchmark-storage, <machine id>/


class Hardware:
    """The hardware folder RUN arguments are looked up in, found only when first needed
    (finding this machine's key imports torch)."""

    def __init__(self, baselines: str | None, key: str | None):
        self.root = Path(baselines) if baselines else default_baselines_root()
        self._key = key
        # another project, without a baselines/ folder: pytest-benchmark's own storage
        self.storage = None
        if baselines is None and not self.root.is_dir():
            if PYTEST_BENCHMARK_STORAGE.is_dir():
                self.storage = PYTEST_BENCHMARK_STORAGE.resolve()

    @property
    def folder(self) -> Path:
        if self.storage is not None:
            return self.storage
        if self._key is None:
            self._key = this_machine_key()
        return key_folder(self.root, self._key)

    def resolve(self, argument: str) -> Run:
        """The run a RUN argument names; an existing path needs no hardware folder."""
        if Path(argument).is_file():
            return store.load(Path(argument))
        return store.load(store.resolve(argument, self.folder))

    def runs(self) -> list[Run]:
        """The folder's runs, oldest first by recorded datetime; NoSuchRun when there are none."""
        runs = store.saved_runs(self.folder)
        if not runs:
            raise store.NoSuchRun(
                f"{store.no_runs_message(self.folder)}; {store.SAVE_HINT}, pick another "
                "folder with --hardware KEY or --baselines DIR, or pass run files' paths"
            )
        return runs

    def newest(self, count: int) -> list[Run]:
        """The newest ``count`` runs that can be a baseline (none dated in the future, as the
        gate chooses: ``store.baseline.candidates``), oldest first."""
        self.runs()  # NoSuchRun, saying where, when the folder has no run at all
        runs = candidates(self.folder)
        if len(runs) < count:
            raise store.NoSuchRun(
                f"only {len(runs)} saved run in {self.folder}; name the runs to compare (a path, "
                f"or a run number such as 0001), or {store.SAVE_HINT}"
            )
        return runs[-count:]


def default_baselines_root() -> Path:
    """The nearest ``baselines/`` folder from the working directory up, else ./baselines."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "baselines").is_dir():
            return folder / "baselines"
    return here / "baselines"


def default_store_root() -> Path:
    """The nearest ``baselines/``; without one, pytest-benchmark's ``.benchmarks/`` where it
    exists (another project's store: its machine-id folders stand for hardware folders)."""
    root = default_baselines_root()
    if not root.is_dir() and PYTEST_BENCHMARK_STORAGE.is_dir():
        return PYTEST_BENCHMARK_STORAGE.resolve()
    return root
