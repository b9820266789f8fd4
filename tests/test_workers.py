"""Merging a fake two-worker run (pytest-xdist, one worker per GPU) into one run JSON that the
store and the gate read like any other."""

from __future__ import annotations

import json
import sys
import types

import pytest
from helpers import FAKE_PYNVML, entry, make_cases_project, rounds, run_json, samples, saved_runs
from helpers import report_verdicts as verdicts
from helpers import run_cases as sharded_run

from perfgate import workers
from perfgate.benchmark import run_from_json
from perfgate.measure import gpu, machine, nvml
from perfgate.store.merge import MergeError, merge_runs
from perfgate.verdict import judge


def worker_run(*names: str, untrusted=None, key="NVIDIA-H100", day="2026-11-23") -> dict:
    entries = [entry(f"perf_tests/test_x.py::{n}", rounds(i)) for i, n in enumerate(names)]
    run = run_json(*entries, untrusted=untrusted, key=key, datetime=f"{day}T10:00:00+00:00")
    return json.loads(json.dumps(run))


def test_two_workers_make_one_run_the_gate_reads():
    runs = {"gw1": worker_run("test_c", day="2026-11-24"), "gw0": worker_run("test_a", "test_b")}
    merged = merge_runs(runs, "worker")
    run = run_from_json(merged, None)
    names = [b.name for b in run.benchmarks.values()]
    assert names == ["test_a", "test_b", "test_c"]  # worker order, then each worker's order
    workers = [b.extra_info["worker"] for b in run.benchmarks.values()]
    assert workers == ["gw0", "gw0", "gw1"]
    assert merged["datetime"].startswith("2026-11-23") and run.perfgate["workers"] == ["gw0", "gw1"]
    assert not run.untrusted_reasons
    # the merged run is an ordinary run: judged against itself, all unchanged
    assert {str(r.verdict) for r in judge([run], run)} == {"unchanged"}
    assert runs["gw0"]["benchmarks"][0]["extra_info"] == {}  # the workers' runs are not changed


def test_an_untrusted_gpu_on_one_worker_makes_the_run_untrusted():
    runs = {"gw0": worker_run("test_a"), "gw1": worker_run("test_b", untrusted=["too hot"])}
    run = run_from_json(merge_runs(runs, "worker"), None)
    assert run.untrusted_reasons == ["gw1: too hot"]


TWICE = {"gw0": worker_run("test_a"), "gw1": worker_run("test_a")}
MIXED = {"gw0": worker_run("test_a"), "gw1": worker_run("test_b", key="NVIDIA-A100")}


@pytest.mark.parametrize(
    "runs, message",
    [
        ({}, "no worker wrote a run"),
        (TWICE, "test_a was run by both worker gw0 and worker gw1"),
        (MIXED, "workers ran on different hardware (gw0: NVIDIA-H100, gw1: NVIDIA-A100)"),
    ],
)
def test_runs_that_cannot_be_one_run_say_why(runs, message):
    with pytest.raises(MergeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        merge_runs(runs, "worker")


@pytest.fixture
def cases_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return make_cases_project(pytester, monkeypatch)


# --- pytest-xdist end to end: two CPU workers, one merged run, one verdict -----------------------
def test_two_xdist_workers_give_one_merged_run_and_the_unsharded_verdicts(
    cases_project, monkeypatch
):
    assert sharded_run(cases_project, "--benchmark-save=base").ret == 0
    monkeypatch.setenv("PERFGATE_SLOW_CASE", "d")
    alone = sharded_run(cases_project, "--perf-gate", "--benchmark-json=alone.json",
                        "--perf-gate-report=alone/gate.md")  # fmt: skip
    assert alone.ret == pytest.ExitCode.TESTS_FAILED, alone.stdout.str()
    result = sharded_run(cases_project, "-p", "xdist", "-n", "2", "--perf-gate",
                         "--benchmark-json=merged.json", "--benchmark-save=next",
                         "--perf-gate-report=merged/gate.md")  # fmt: skip
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.stdout.fnmatch_lines(["*perfgate gate*", "*regression*"])
    merged = json.loads((cases_project.path / "merged.json").read_text())
    workers = {b["fullname"]: b["extra_info"]["worker"] for b in merged["benchmarks"]}
    assert sorted(set(workers.values())) == ["gw0", "gw1"]  # both workers timed cases
    # the partners of a same-run ratio (test_first's cases, relative to a) are one worker's
    assert len({workers[f"test_cases.py::test_first[{case}]"] for case in "abc"}) == 1
    assert samples(cases_project.path / "merged.json") == samples(cases_project.path / "alone.json")
    assert verdicts(cases_project.path / "merged" / "gate.json") == verdicts(
        cases_project.path / "alone" / "gate.json"
    )
    # a gate that found a regression saves nothing as a baseline: the merged run is kept aside
    assert [p.name for p in saved_runs(cases_project)] == ["0001_base.json"]
    assert "NOT saved as a baseline: the gate found confirmed regressions" in output


def test_xdist_workers_save_one_merged_baseline_that_the_gate_then_reads(cases_project):
    result = sharded_run(cases_project, "-p", "xdist", "-n", "2", "--benchmark-save=base")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    runs = saved_runs(cases_project)
    assert [p.name for p in runs] == ["0001_base.json"]
    saved = json.loads(runs[0].read_text())
    assert len(saved["benchmarks"]) == 5 and saved["machine_info"]["perfgate"]["workers"] == [
        "gw0",
        "gw1",
    ]
    gated = sharded_run(cases_project, "-p", "xdist", "-n", "2", "--perf-gate")
    assert gated.ret == 0, gated.stdout.str()
    gated.stdout.fnmatch_lines(["*5 gated*"])


@pytest.mark.parametrize(
    "args, line",
    [
        (["-k", "nothing"], "none of the 0 selected benchmarks is in the baseline"),
        (["--benchmark-disable"], "benchmarks are not timed here (--benchmark-disable)"),
    ],
)
def test_xdist_gate_that_would_compare_nothing_says_so_once(cases_project, args, line):
    assert sharded_run(cases_project, "--benchmark-save=base").ret == 0
    result = sharded_run(cases_project, "-p", "xdist", "-n", "2", "--perf-gate", *args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 6, output
    assert output.count(line) == 1, output
    assert "Traceback" not in output and "INTERNALERROR" not in output


# --- one GPU per worker, with fakes for torch.cuda and NVML ------------------------------------
class FakeCuda:
    def __init__(self, count: int, name: str = "NVIDIA H200"):
        self.count, self.name, self.current = count, name, 0

    def device_count(self) -> int:
        return self.count

    def set_device(self, index: int) -> None:
        self.current = index

    def get_device_name(self, index: int) -> str:
        return self.name


class FakeNvml:
    def __init__(self):
        self.index = 0

    def select(self, index: int) -> None:
        self.index = index

    def device(self):
        index = self.index
        return type("Device", (), {"uuid": lambda self: f"GPU-{index:04d}", "nvml": None})()


def test_each_worker_pins_its_own_gpu_and_records_it(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cuda, nvml = FakeCuda(2), FakeNvml()
    facts = gpu.pin("gw1", cuda, nvml)
    assert cuda.current == 1 and nvml.index == 1
    assert facts == {"worker": "gw1", "index": 1, "physical_index": 1, "name": "NVIDIA H200",
                     "uuid": "GPU-0001"}  # fmt: skip


def test_cuda_visible_devices_maps_a_worker_to_its_physical_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    nvml = FakeNvml()
    assert gpu.pin("gw1", FakeCuda(2), nvml)["physical_index"] == 5 and nvml.index == 5
    assert gpu.physical_index(0, "GPU-abc,GPU-def") == 0


@pytest.mark.parametrize(
    "worker, count, line",
    [
        ("gw2", 2, "-n 3 with 2 GPUs: each worker times on a GPU of its own, so run -n 2"),
        ("gw0", 0, "no CUDA device here"),
        ("main", 2, "is not gwN"),
    ],
)
def test_a_worker_without_a_gpu_of_its_own_is_refused(worker, count, line):
    with pytest.raises(pytest.UsageError, match=line.replace("(", r"\(")):
        gpu.pin(worker, FakeCuda(count), FakeNvml())


def gpu_case(index: int, uuid: str) -> dict:
    gpu_facts = {"index": index, "physical_index": index, "uuid": uuid}
    return entry("perf_tests/test_x.py::test_a", rounds(0), extra={"gpu": gpu_facts})


def test_a_case_compared_across_two_gpus_says_so_in_its_detail():
    before = run_from_json(json.loads(json.dumps(run_json(gpu_case(0, "GPU-aaaa")))), None)
    moved = run_from_json(json.loads(json.dumps(run_json(gpu_case(1, "GPU-bbbb")))), None)
    (result,) = judge([before], moved)
    assert any("compared across two GPUs of one model: baseline on GPU 0 (GPU-aaaa), now on "
               "GPU 1 (GPU-bbbb)" in line for line in result.details)  # fmt: skip
    (same,) = judge([before], before)
    assert not any("two GPUs" in line for line in same.details)


def test_gpus_of_one_model_share_a_hardware_key_and_two_models_do_not_merge():
    h200 = {
        "gw0": worker_run("test_a", key="NVIDIA-H200"),
        "gw1": worker_run("test_b", key="NVIDIA-H200"),
    }
    assert run_from_json(merge_runs(h200, "worker"), None).hardware_key == "NVIDIA-H200"


def test_a_pinned_worker_reads_the_clocks_and_health_of_its_own_gpu(monkeypatch):
    module = types.ModuleType("pynvml")
    exec(FAKE_PYNVML + "\ndef nvmlDeviceGetUUID(handle):\n    return f'GPU-{handle[1]}'\n",
         module.__dict__)  # fmt: skip
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    try:
        facts = gpu.pin("gw1", FakeCuda(2))
        assert facts["uuid"] == "GPU-1" and nvml.device().handle == ("gpu", 1)
        assert machine.gpu_health()["clocks.sm"] == "1980"  # read through GPU 1's handle
    finally:
        nvml.select(0)


def test_a_worker_records_its_gpu_and_leaves_saving_to_the_controller():
    option = types.SimpleNamespace(benchmark_save="x", benchmark_autosave=True, benchmark_json="j")
    facts = {"worker": "gw1", "index": 1}
    worker = workers.Worker(types.SimpleNamespace(option=option), facts)
    assert (option.benchmark_save, option.benchmark_autosave, option.benchmark_json) == (
        None,
        False,
        None,
    )
    assert worker.machine_info() == {"gpu": facts}  # into machine_info["perfgate"]


@pytest.mark.parametrize("cuda, gpus, workers", [(True, 2, 2), (True, 0, None), (False, 2, None)])
def test_n_auto_on_cuda_is_one_worker_per_gpu(monkeypatch, cuda, gpus, workers):
    from perfgate import options, plugin

    monkeypatch.setattr(options, "asked", lambda config: True)
    monkeypatch.setattr(plugin, "uses_cuda", lambda config: cuda)
    monkeypatch.setattr(gpu, "device_count", lambda: gpus)
    assert plugin.pytest_xdist_auto_num_workers(None) == workers  # None: xdist's own count


@pytest.mark.parametrize(
    "numprocesses, worker, gate, times",
    [
        (None, None, True, True),  # no xdist: this process times
        (2, None, True, False),  # the controller of a merged session times nothing
        (2, "gw1", True, True),  # its workers do, each on its own GPU
        (2, None, False, True),  # xdist without a result to merge: as before perfgate
        (2, "gw1", False, False),
    ],
)
def test_the_process_that_times_is_the_one_that_locks_its_gpu(numprocesses, worker, gate, times):
    option = types.SimpleNamespace(
        numprocesses=numprocesses,
        benchmark_json=None,
        benchmark_save=None,
        benchmark_autosave=False,
    )
    config = types.SimpleNamespace(option=option, getoption=lambda name: gate)
    if worker:
        config.workerinput = {"workerid": worker}
    assert workers.times_here(config) is times
