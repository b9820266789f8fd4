"""The baseline of one pytest session, from its options: its hardware folder, the chosen run and
its set, where a save goes, and "the gate cannot run".

Decided in ``pytest_configure``, before the first benchmark runs, so a missing or broken baseline
costs a second, not a GPU run. perfgate loads and checks baselines itself and tells
pytest-benchmark to load nothing (``_pytest_benchmark.show_comparison_with`` then gives its table
the chosen run). Which run is the baseline, and its set, is ``store.baseline``'s one choice, the
same as the CLI's.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark, store
from perfgate import format as fmt
from perfgate.benchmark import Run
from perfgate.options import Options
from perfgate.store import baseline
from perfgate.store import schema as run_schema

GATE_NOT_RUN = 6  # exit status: the gate could not run or gated nothing (docs: exit codes)
FIRST_BASELINE = 8  # exit status: no baseline yet; this gated session saved the first one
FIRST_NAME = "first"  # the name of the run --perf-first-baseline saves


class GateCannotRun(Exception):
    """Why ``--perf-gate`` cannot run; the message is one line that says what to do."""


@dataclass
class BaselineChoice:
    """What this session compares with and where it saves."""

    key_folder: Path
    gate: bool
    per_hardware: bool = False  # key_folder is <baselines root>/<hardware key>
    baseline: Run | None = None
    members: list[Run] = field(default_factory=list)  # the baseline set, oldest first
    first: str | None = None  # the gate has no baseline yet and saves this run as the first: why

    @property
    def label(self) -> str:
        if self.baseline is None:
            return "no baseline"
        if len(self.members) == 1:
            return str(self.baseline.path)
        earlier = ", ".join(run.path.name for run in self.members[:-1])
        span = f", saved over {self.span}" if self.span else ""
        return (
            f"{self.baseline.path} (a set with {earlier}{span}: each benchmark is compared with "
            "its slowest run in the set, each ratio with its worst)"
        )

    @property
    def span(self) -> str:
        """How far apart the set's runs were saved ('' where a run has no date): runs saved
        minutes apart see one moment of a shared runner, runs saved in separate sessions (one a
        CI run) how its sessions differ."""
        ends = (self.members[0], self.baseline)
        if not all(run.datetime for run in ends):
            return ""
        first, last = (run_schema.recorded_at(run) for run in ends)
        minutes = max((last - first).total_seconds(), 0.0) / 60
        if minutes < 120:
            return f"{minutes:.0f} min"
        return f"{minutes / 60:.0f} h" if minutes < 48 * 60 else f"{minutes / 1440:.0f} days"


def storage_folder(config: pytest.Config, key: str, read: Options) -> Path:
    """The folder runs are read from and saved to: an explicit --benchmark-storage (file://PATH)
    is that folder; else <--perf-baselines or the ini perfgate_baselines>/<key>; else
    pytest-benchmark's own storage (``.benchmarks`` in the current folder), as it would use it."""
    storage = config.option.benchmark_storage
    if "://" not in storage:  # a plain path, as pytest-benchmark reads it
        storage = f"file://{storage}"
    if not storage.startswith("file://"):
        raise pytest.UsageError(
            f"--benchmark-storage {storage}: perfgate reads and saves file:// storage only; "
            "drop the --perf-* options (and perfgate = true) to use this storage"
        )
    root = read.baselines_root
    if root is not None and (problem := store.folder_problem(root)):
        _refuse(
            read,
            f"the baseline root {problem}; point --perf-baselines (or "
            "perfgate_baselines) at a folder",
        )
    if not _per_hardware(config, read):
        folder = Path(os.path.realpath(Path(storage.removeprefix("file://")).expanduser()))
        if (folder / key).is_dir():
            _refuse(
                read,
                f"--benchmark-storage {storage} is a baseline root (it holds "
                f"{key}/); name the hardware folder: file://{folder / key}",
            )
        return folder
    if not root.is_dir() and not saving_requested(config) and read.baselines is not None:
        message = (
            f"--perf-baselines {root} does not exist; pass the folder that holds the hardware "
            "folders (e.g. baselines/), or add --benchmark-save=NAME to start a new store there"
        )
        _refuse(read, message)
    return baseline.key_folder(root, key)


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` and the folders in it when no file was saved there."""
    for place in [*sorted(folder.glob("*"), reverse=True), folder]:
        with contextlib.suppress(OSError):  # holds a file (or is one): kept
            place.rmdir()


def _refuse(read: Options, message: str) -> None:
    """Exit 6 under the gate (it cannot run), else a usage error (exit 4)."""
    if read.gate:
        raise GateCannotRun(message)
    raise pytest.UsageError(message)


def _per_hardware(config: pytest.Config, read: Options) -> bool:
    """True when runs go to <root>/<hardware key>/ (a baselines root and no explicit storage)."""
    explicit = config.option.benchmark_storage != _pytest_benchmark.DEFAULT_STORAGE
    return not explicit and read.baselines_root is not None


def test_paths(config: pytest.Config) -> list[str]:
    """The session's test paths (or node ids) as the user gave them (none for the current
    folder), for the commands that perfgate prints: ``pytest tests/bench --benchmark-save=NAME``
    (each argument quoted for a shell there: ``shlex.join``)."""
    here = config.invocation_params.dir
    paths = [arg for arg in config.args if Path(arg).resolve() != here.resolve()]
    shown = []
    for path in paths:
        try:
            shown.append(str(Path(path).resolve().relative_to(here.resolve())))
        except ValueError:
            shown.append(path)
    return shown


def node_id_from_here(config: pytest.Config, node_id: str) -> str:
    """``node_id`` (relative to pytest's rootdir) as pytest takes it from the folder the session
    ran in, for the commands that perfgate prints."""
    path, sep, rest = node_id.partition("::")
    try:
        path = os.path.relpath(config.rootpath / path, config.invocation_params.dir)
    except ValueError:  # another drive
        return node_id
    return path + sep + rest


def save_hint(config: pytest.Config, read: Options) -> str:
    """How to record a gateable baseline (per-round data: perfgate asked), with this session's
    own test paths and what it measures (a count needs a counted baseline); under the gate, that
    session saves it as the first and exits 8."""
    measure = ["--perf-measure", "instructions"] if read.instructions else []
    command = shlex.join(
        ["pytest", *test_paths(config), *measure, "--perf-gate", "--benchmark-save=NAME"]
    )
    return (
        f"record one with `{command}`"
        f" (it saves the first baseline and exits {FIRST_BASELINE}: nothing to gate yet)"
    )


def saving_requested(config: pytest.Config) -> bool:
    return bool(config.option.benchmark_save or config.option.benchmark_autosave)


def choose(config: pytest.Config, key: str, read: Options) -> BaselineChoice:
    """Point pytest-benchmark at this hardware's folder and choose the baseline to compare with.

    Raises GateCannotRun under --perf-gate when there is none or it is broken; without the gate a
    missing baseline is one warning line and the run goes on.
    """
    if config.option.benchmark_save:
        _check(store.check_save_name, config.option.benchmark_save)
    gate = read.gate
    folder = storage_folder(config, key, read)
    per_hardware = _per_hardware(config, read)
    if not os.path.lexists(folder):  # pytest-benchmark's storage makes it: not for nothing
        config.add_cleanup(lambda: _remove_empty(folder))
    config.option.benchmark_storage = f"file://{folder}"
    config.option.benchmark_save_data = True  # per-round samples: the gate needs them later
    choice = BaselineChoice(folder, gate, per_hardware)
    wanted = config.option.benchmark_compare
    config.option.benchmark_compare = None  # perfgate loads; pytest-benchmark must not
    if not wanted and not gate:
        return choice
    try:
        choice.baseline, choice.members = baseline.choose(
            wanted, folder, _no_runs(config, choice, read), read.instructions
        )
    except store.StoreError as error:
        first = saving_requested(config) or read.first_baseline
        if gate and isinstance(error, store.NoSuchRun) and not wanted and first:
            if not saving_requested(config):  # --perf-first-baseline
                config.option.benchmark_save = FIRST_NAME
            choice.first = str(error).split("; ")[0]  # the gate's first run: save, nothing to gate
            return choice
        if gate:
            raise GateCannotRun(str(error)) from error
        if not isinstance(error, store.NoSuchRun):
            raise pytest.UsageError(str(error)) from error
        warn(config, f"perfgate: {error}; nothing is compared this run")
        _pytest_benchmark.drop_compare_fail(config)
        return choice
    if gate:
        require_samples(choice.members)
    _check_hardware(config, choice.members, key, gate)
    try:
        store.check_for_comparison_table(choice.baseline)  # pytest-benchmark's table shows it
    except store.StoreError as error:
        _refuse(read, str(error))
    for run in store.saved_runs(folder):
        if run_schema.from_the_future(run):
            warn(config, f"perfgate: warning: {store.future_message(run)}")
    warn(config, f"perfgate: comparing with {choice.label}")
    return choice


def _check(check, *arguments) -> None:
    """A usage error (exit 4, one line) for what ``check`` refuses with a StoreError."""
    try:
        check(*arguments)
    except store.StoreError as error:
        raise pytest.UsageError(str(error)) from error


def _check_hardware(config: pytest.Config, members: list[Run], key: str, gate: bool) -> None:
    """A baseline recorded on other hardware: the gate refuses it, a comparison warns."""
    for run in members:
        recorded = run.recorded_key
        if recorded and recorded != key:
            line = (
                f"baseline {run.path} was recorded on {recorded}, and this machine is {key}; "
                f"pass a run of {key}, or compare across hardware with `perfgate compare A B`"
            )
            if gate:
                raise GateCannotRun(line)
            warn(config, f"perfgate: warning: {line}")
            return


def _no_runs(config: pytest.Config, choice: BaselineChoice, read: Options) -> str:
    """No saved run to compare with: where, and how to record one with this session's paths."""
    folder = choice.key_folder
    if choice.per_hardware:
        return f"{store.no_runs_message(folder)}; {save_hint(config, read)}"
    what = "counted run" if read.instructions else "run"
    return f"no saved {what} in {folder} to compare with; {save_hint(config, read)}"


def require_samples(members: list[Run]) -> None:
    """GateCannotRun when a run of the baseline set has no per-round data."""
    for run in members:
        if bare := run.without_samples():
            raise GateCannotRun(
                f"baseline {run.path}: {bare[0].fullname} (and {len(bare) - 1} more) has no "
                "per-round data, so it cannot be compared; record the baseline again with "
                "`--benchmark-save=NAME --benchmark-save-data` under a NAME of its own (a set "
                "ends at another name), or move that run out of the store (a session that asks "
                "for perfgate saves per-round data by itself)"
            )


def warn(config: pytest.Config, line: str) -> None:
    """One yellow line in pytest's terminal (printed where there is none); stored text in it
    is escaped (``format.terminal``)."""
    line = fmt.terminal(line)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, yellow=True)
    else:
        print(line)
