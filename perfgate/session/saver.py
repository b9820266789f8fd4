"""``--benchmark-save`` inside a pytest session: the run goes through the store (atomic,
exclusive), and never as a baseline when the session did not finish cleanly, its gate failed, or
its commit is not in the repository's history (``store.lineage``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark, store
from perfgate.fields import with_bounded_data
from perfgate.outputs import disk_problem
from perfgate.session.baseline import BaselineChoice, warn
from perfgate.store import lineage, saving


class Saver:
    """``--benchmark-save`` through the store: atomic, exclusive, and never for a session that
    did not finish cleanly or whose gate failed (that run goes to perfgate-results/unsaved/)."""

    def __init__(self, config: pytest.Config, choice: BaselineChoice, key: str):
        self.config, self.choice, self.key = config, choice, key
        self.session: pytest.Session | None = None
        self.gate_failed = False

    def __call__(self, run_json: dict, name: str) -> None:
        run_json = with_bounded_data(run_json)  # a saved run keeps at most KEPT_ROUNDS a case
        machine_id = _pytest_benchmark.machine_id(self.config)
        root = Path(self.config.rootpath)
        commit = (run_json.get("commit_info") or {}).get("id")
        unclean = self._unclean() or lineage.not_in_history(commit, root)
        outcome = saving.save_run(
            run_json,
            name,
            root,
            unclean,
            lambda kept: store.save_file(self.choice.key_folder, machine_id, name, kept),
        )
        warn(self.config, outcome.line)
        if self.session is not None and (outcome.failed or outcome.interrupted):
            failed = saving.SAVE_FAILED if outcome.failed else pytest.ExitCode.INTERRUPTED
            self.session.exitstatus = failed
        if outcome.saved is None:
            return
        path = outcome.saved
        compared = self.choice.baseline
        if self.choice.per_hardware and compared is not None and compared.hardware_key != self.key:
            warn(
                self.config,
                f"perfgate: warning: saved under {self.key}, but compared with a "
                f"run of {compared.hardware_key} ({compared.path})",
            )
        if self.choice.gate:
            warn(
                self.config,
                f"perfgate: warning: {path.name} is now the newest baseline of "
                f"{self.key}: the next --perf-gate compares with it",
            )

    def write_json(self, run_json: dict) -> None:
        """``--benchmark-json``: the run written whole or not at all; a full disk is one line
        and exit status SAVE_FAILED, never a traceback."""
        target = self.config.option.benchmark_json
        try:
            store.write_json(target, run_json)
        except OSError as error:
            shown = target if isinstance(target, str | PathLike) else getattr(target, "name", "")
            warn(
                self.config,
                f"perfgate: --benchmark-json {shown} NOT written: {disk_problem(error, 'the run')}",
            )
            if self.session is not None:
                self.session.exitstatus = saving.SAVE_FAILED

    def _unclean(self) -> str | None:
        status = self.session.exitstatus if self.session is not None else 0
        if status == pytest.ExitCode.INTERRUPTED:
            return "the session was interrupted"
        if status != pytest.ExitCode.OK or (self.session and self.session.testsfailed):
            return f"the session did not finish cleanly (exit status {int(status)})"
        if self.gate_failed:
            return "the gate found confirmed regressions"
        return None
