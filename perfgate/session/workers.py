"""pytest-xdist: one worker per GPU times its share of the matrix; the controller merges the
workers' runs into one run (``merge.merge_runs``), saves that one run and gates it.

pytest-benchmark turns itself off under xdist. A session that asks for perfgate and for a result
(``--perf-gate``, ``--benchmark-save``/``--benchmark-autosave`` or ``--benchmark-json``) under
``-n N`` turns timing back on in each worker instead: a worker times the cases it is given, runs
the gate's confirmation re-runs and profiles for its own cases, and sends its run to the
controller (``config.workeroutput``); only the controller saves, writes JSON and decides. Cases
are scheduled in groups: a case with the partners of its same-run ratios, timed by one worker,
as the worker's confirmation re-runs need.

With ``--device cuda`` worker ``gwK`` pins itself to CUDA device K (``measure/gpu.py``: under
CUDA_VISIBLE_DEVICES, the K-th GPU it leaves) and records it, so no two timed benchmarks share a
GPU; ``-n auto`` is one worker per GPU. Without a GPU the workers share the CPU's cores: fine
for testing the merge, not for timings worth gating. Under ``--perf-shard I/N`` every worker
keeps the same part of the matrix; the merged run records the shard, and the controller's gate
leaves the cases of the other parts to their shards, as a shard's own gate does.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark
from perfgate.benchmark import Run, run_from_json
from perfgate.fields import Field
from perfgate.measure import gpu
from perfgate.session.declarations import ratio_group
from perfgate.session.gate import GateSession, with_info
from perfgate.session.reruns import say
from perfgate.session.sharding import ShardSelection
from perfgate.store.merge import MergeError, merge_runs
from perfgate.store.saving import SAVE_FAILED

RUN, GATE, PROBLEM = "perfgate_run", "perfgate_gate", "perfgate_problem"  # workeroutput keys
ELSEWHERE = "perfgate_elsewhere"  # workeroutput: the cases of the other shards (--perf-shard)
GROUPS = "perfgate_groups"  # workerinput: the folder where workers write their ratio groups


def worker_id(config: pytest.Config) -> str | None:
    return (getattr(config, "workerinput", None) or {}).get("workerid")


def merging(config: pytest.Config) -> bool:
    """True in a pytest-xdist session (controller or worker) whose runs perfgate merges."""
    if not getattr(config.option, "numprocesses", None) and worker_id(config) is None:
        return False
    wanted = config.getoption("--perf-gate") or config.option.benchmark_json
    return bool(wanted or config.option.benchmark_save or config.option.benchmark_autosave)


def times_here(config: pytest.Config) -> bool:
    """True in the process that times the benchmarks (and locks its GPU's clocks): a session
    without pytest-xdist, or a worker whose run perfgate merges (each on its own GPU)."""
    return merging(config) == (worker_id(config) is not None)


def configure(config: pytest.Config, use_cuda: bool) -> tuple[Worker | None, Controller | None]:
    """This process's side of a merged xdist session: (its worker, its controller), or neither."""
    if not merging(config):
        return None, None
    if worker_id(config) is None:
        if use_cuda:
            gpu.check_worker_count(config.option.numprocesses, gpu.device_count())
        return None, Controller(config)
    return Worker(config), None


def timing_gpu(config: pytest.Config, use_cuda: bool) -> dict | None:
    """The GPU this process times on, made the one it reads through NVML (``measure.gpu``):
    worker ``gwK``'s CUDA device K, else torch's current device; what the run records of it.
    None where this process times nothing on CUDA; a MIG instance is a usage error."""
    if not use_cuda or not times_here(config):
        return None
    worker = worker_id(config)
    try:
        return gpu.pin(worker) if worker is not None else gpu.current()
    except gpu.GpuError as error:
        raise pytest.UsageError(str(error)) from None


def new_gate(worker: Worker | None, controller: Controller | None, *arguments) -> GateSession:
    """This process's gate (``GateSession``'s ``arguments``): a worker's, the controller's of a
    merged run, or the one gate of a session without pytest-xdist."""
    if worker is not None:
        return WorkerGate(*arguments)
    if controller is not None:
        return MergedGate(*arguments, controller=controller)
    return GateSession(*arguments)


def scheduler(config: pytest.Config, log, groups: Path):
    """Cases go to workers in groups: a case with the partners of its same-run ratios
    (``declarations.ratio_group``, as the workers found them when collecting); None for a
    ``--dist`` the user chose (xdist's own scheduling)."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    found = {}

    class ByRatioGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not found:  # every worker wrote its file before reporting its collection
                for path in sorted(groups.glob("*.json")):
                    found.update(json.loads(path.read_text(encoding="utf-8")))
            return found.get(nodeid, nodeid)

    return ByRatioGroup(config, log)


class Worker:
    """A worker's side: time under xdist, leave saving to the controller, send the run."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.groups = (getattr(config, "workerinput", None) or {}).get(GROUPS)
        for option, off in (
            ("benchmark_save", None),
            ("benchmark_autosave", False),
            ("benchmark_json", None),
        ):
            setattr(config.option, option, off)

    def start(self) -> None:
        """At session start (pytest-benchmark's session exists by then): time under xdist."""
        _pytest_benchmark.time_under_xdist(self.config)

    def write_groups(self, items: list[pytest.Item]) -> None:
        """The ratio groups of the collected items, for the controller's scheduler."""
        if not self.groups:
            return
        groups = {item.nodeid: ratio_group(item) for item in items}
        path = Path(self.groups) / f"{worker_id(self.config)}.json"
        path.with_suffix(".tmp").write_text(json.dumps(groups), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)  # the scheduler never reads half a file

    def send_run(self, shard: ShardSelection | None) -> None:
        """The worker's run, and the cases of the other shards (not judged by this shard)."""
        run = _pytest_benchmark.session_json(self.config)
        self.config.workeroutput[RUN] = json.dumps(run)
        self.config.workeroutput[ELSEWHERE] = sorted(shard.elsewhere) if shard else []


class WorkerGate(GateSession):
    """The gate in a worker: checks, confirmation re-runs and profiles of its own cases; the
    controller judges the merged run, reports and sets the exit status."""

    def check(self, items: list[pytest.Item]) -> None:
        super().check(items)
        if self.problem:
            self.config.workeroutput[PROBLEM] = self.problem

    def conclude(self, current: Run, confirmation: Run | None) -> None:
        """Send the re-runs and the profiles of what was confirmed to the controller."""
        profiles = {name: b.profile for name, b in current.benchmarks.items() if b.profile}
        sent = {"confirmation": self.confirmation_json, "profiles": profiles}
        self.config.workeroutput[GATE] = json.dumps(sent)

    def summary(self) -> list[str]:
        return []

    def exit_status(self, session: pytest.Session) -> None:
        return None


class Controller:
    """The controller's side: gathers the workers' runs, merges, saves the merged run."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.sent: dict[str, dict] = {}
        self.merged: dict | None = None
        self.problem: str | None = None
        self.groups = Path(tempfile.mkdtemp(prefix="perfgate-xdist-groups-"))
        config.add_cleanup(lambda: shutil.rmtree(self.groups, ignore_errors=True))

    def configure_node(self, node) -> None:
        node.workerinput[GROUPS] = str(self.groups)

    def node_down(self, node) -> None:
        output = getattr(node, "workeroutput", None) or {}
        worker = (getattr(node, "workerinput", None) or {}).get("workerid") or str(node.gateway.id)
        self.sent[worker] = {key: output.get(key) for key in (RUN, GATE, PROBLEM, ELSEWHERE)}

    def merge(self) -> dict | None:
        """The merged run (None when no worker timed anything); sets ``problem`` when the
        workers' runs cannot be one run."""
        runs = {w: json.loads(s[RUN]) for w, s in self.sent.items() if s.get(RUN)}
        runs = {w: run for w, run in runs.items() if run.get("benchmarks")}
        if self.merged is None and runs:
            try:
                self.merged = merge_runs(runs, Field.WORKER)
            except MergeError as error:
                self.problem = f"the workers' runs cannot be merged: {error}"
        return self.merged

    def measured(self) -> bool:
        """Whether a worker that is done sent a run with a case in it."""
        return any(json.loads(s[RUN]).get("benchmarks") for s in self.sent.values() if s.get(RUN))

    def confirmation(self) -> dict | None:
        sent = {w: json.loads(s[GATE]) for w, s in self.sent.items() if s.get(GATE)}
        parts = {w: part["confirmation"] for w, part in sent.items() if part["confirmation"]}
        return merge_runs(parts, Field.WORKER) if parts else None

    def profiles(self) -> dict:
        sent = [json.loads(s[GATE]) for s in self.sent.values() if s.get(GATE)]
        return {name: profile for part in sent for name, profile in part["profiles"].items()}

    def worker_problem(self) -> str | None:
        return next((s[PROBLEM] for _, s in sorted(self.sent.items()) if s.get(PROBLEM)), None)

    def elsewhere(self) -> set[str]:
        """The cases the workers left to the other shards (the same split in every worker)."""
        return {name for sent in self.sent.values() for name in sent.get(ELSEWHERE) or []}

    def save(self, session: pytest.Session, saver, gate: bool) -> None:
        """Write and save the merged run (``--benchmark-json``,
        ``--benchmark-save``/``--benchmark-autosave``) through the session's ``saver``."""
        merged = self.merge()
        if merged is None:
            if self.problem and not gate:  # the gate says it
                say(self.config, f"perfgate: NOT saved or written: {self.problem}")
                session.exitstatus = SAVE_FAILED
            return
        if self.config.option.benchmark_json:
            saver.write_json(merged)
        name = self.config.option.benchmark_save or self.config.option.benchmark_autosave
        if name:
            saver(merged, name if isinstance(name, str) else _autosave_name(merged))


@dataclass
class MergedGate(GateSession):
    """The gate on the controller: judges the merged run of the workers, with their re-runs and
    the profiles of what they confirmed (launch counts are in their runs)."""

    controller: Controller | None = None

    def current(self, session: pytest.Session) -> Run | None:
        merged = self.controller.merge()
        if self.shard is not None:  # the controller collects nothing: its workers did
            self.shard.elsewhere = self.controller.elsewhere()
        self.problem = self.controller.worker_problem() or self.controller.problem or self.problem
        if not self.problem and merged is None:
            self.problem = "no worker timed a benchmark; run the gate without -n"
        return None if self.problem else run_from_json(merged, None)

    def confirm(self, session: pytest.Session, current: Run) -> Run | None:
        confirmation = self.controller.confirmation()
        return None if confirmation is None else run_from_json(confirmation, None)

    def count_launches(self, session: pytest.Session, current: Run, confirmation) -> Run:
        return current

    def profile_confirmed(self, session: pytest.Session, current: Run, confirmation) -> Run:
        return with_info(current, Field.PROFILE, self.controller.profiles())


def _autosave_name(run: dict) -> str:
    commit = (run.get("commit_info") or {}).get("id") or "uncommitted"
    return f"{commit[:12]}_merged"
