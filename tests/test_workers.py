"""Merging a fake two-worker run (pytest-xdist, one worker per GPU) into one run JSON that the
store and the gate read like any other."""

from __future__ import annotations

import json
import types

import pytest
from helpers import (
    FAKE_PYNVML,
    HOST_UUIDS,
    FakeCuda,
    entry,
    install_fake_pynvml,
    make_cases_project,
    rounds,
    run_json,
    samples,
    saved_runs,
)
from helpers import report_verdicts as verdicts
from helpers import run_cases as sharded_run

from perfgate.benchmark import run_from_json
from perfgate.measure import gpu, machine, nvml
from perfgate.session import workers
from perfgate.session.state import SessionState
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
@pytest.mark.slow
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
    assert "no case was measured" not in output  # the controller measures none: its workers do


@pytest.mark.slow
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
    assert "no case was measured" not in gated.stdout.str() + gated.stderr.str()


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
@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_each_worker_pins_its_own_gpu_and_records_it(monkeypatch, count):
    install_fake_pynvml(monkeypatch, count)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for number in range(count):
        cuda = FakeCuda(HOST_UUIDS[:count])
        facts = gpu.pin(f"gw{number}", cuda)
        assert cuda.current == number and nvml.device().uuid() == HOST_UUIDS[number]
        assert facts == {"index": number, "physical_index": number, "uuid": HOST_UUIDS[number],
                         "name": "NVIDIA H100 80GB HBM3"}  # fmt: skip


@pytest.mark.parametrize(
    "count, visible, physical",
    [
        (8, "2,3", [2, 3]),
        (8, f"{HOST_UUIDS[2]},{HOST_UUIDS[3]}", [2, 3]),
        (4, "3,1", [3, 1]),
        (8, "GPU-d85a,GPU-e1f3", [7, 4]),
        (2, "1", [1]),
    ],
)
def test_workers_under_cuda_visible_devices_pin_the_physical_gpus_it_names(
    monkeypatch, count, visible, physical
):
    install_fake_pynvml(monkeypatch, count, PROCESSES=[(1567, 1802, 0)])  # a job on GPU 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    for number, expected in enumerate(physical):
        facts = gpu.pin(f"gw{number}", FakeCuda([HOST_UUIDS[i] for i in physical]))
        assert (facts["index"], facts["physical_index"]) == (number, expected)
        assert facts["uuid"] == HOST_UUIDS[expected] == nvml.device().uuid()
        assert machine.gpu_health()["trusted"] is (expected != 0)


@pytest.mark.parametrize(
    "worker, count, line",
    [
        ("gw2", 2, "-n 3 with 2 GPUs: each worker times on a GPU of its own, so run -n 2"),
        ("gw0", 0, "no CUDA device here"),
        ("main", 2, "is not gwN"),
    ],
)
def test_a_worker_without_a_gpu_of_its_own_is_refused(monkeypatch, worker, count, line):
    install_fake_pynvml(monkeypatch, 2)
    with pytest.raises(pytest.UsageError, match=line.replace("(", r"\(")):
        gpu.pin(worker, FakeCuda(HOST_UUIDS[:count]))


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
    install_fake_pynvml(monkeypatch, 2, SM_CLOCK_OF={0: 1410, 1: 1755})
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    facts = gpu.pin("gw1", FakeCuda(HOST_UUIDS[:2]))
    assert facts["uuid"] == HOST_UUIDS[1] and nvml.device().handle == ("gpu", 1)
    assert machine.gpu_health()["clocks.sm"] == "1755"  # read through GPU 1's handle


def test_a_worker_leaves_saving_to_the_controller_and_the_run_records_its_gpu():
    option = types.SimpleNamespace(benchmark_save="x", benchmark_autosave=True, benchmark_json="j")
    workers.Worker(types.SimpleNamespace(option=option))
    assert (option.benchmark_save, option.benchmark_autosave, option.benchmark_json) == (
        None,
        False,
        None,
    )
    facts = {"index": 1, "physical_index": 3, "uuid": HOST_UUIDS[3], "name": "NVIDIA H200"}
    state = SessionState(None, None, "NVIDIA-H200", None, None, None, gpu=facts)
    assert state.machine_info(use_cuda=False)["gpu"] == facts  # into machine_info["perfgate"]
    assert "gpu" not in SessionState(None, None, "KEY", None, None, None).machine_info(False)


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


# --- end to end: a fake CUDA host under the plugin, one process or pytest-xdist workers ----------
FAKE_CUDA = f"""
import os, types, uuid

import torch

HOST = {HOST_UUIDS!r}  # the GPUs of this fake host, in CUDA's order as in NVML's (one model)
current = [0]


def visible():
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return HOST
    return [HOST[int(e)] if e.isdigit() else e for e in value.split(",")]  # indices or UUIDs


def properties(index):
    return types.SimpleNamespace(uuid=uuid.UUID(visible()[index].split("-", 1)[1]))


torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: len(visible())
torch.cuda.current_device = lambda: current[0]
torch.cuda.set_device = lambda index: current.__setitem__(0, index)
torch.cuda.get_device_name = lambda index=None: "NVIDIA H100 80GB HBM3"
torch.cuda.get_device_properties = properties


def pytest_perfgate_uses_cuda(config):
    return True
"""


def fake_cuda_host(project: pytest.Pytester, gpus: int) -> None:
    """``gpus`` GPUs, each at an SM clock of its own (1400 + index), and a job on GPU 0."""
    host = f"GPUS = {HOST_UUIDS[:gpus]!r}\nPROCESSES = [(1567, 1802, 0)]\n"
    host += f"SM_CLOCK_OF = {dict((i, 1400 + i) for i in range(gpus))!r}\n"
    locks = "def nvmlDeviceSetGpuLockedClocks(handle, low, high):\n"
    locks += "    open('locked.txt', 'a').write(f'{handle[1]}\\n')\n"  # which GPU was locked
    project.makepyfile(conftest=FAKE_CUDA, pynvml=FAKE_PYNVML + host + locks)


@pytest.mark.parametrize("visible", ["1", HOST_UUIDS[1]])
def test_a_session_given_gpu_1_records_it_and_trusts_it_beside_a_job_on_gpu_0(
    cases_project, monkeypatch, visible
):
    fake_cuda_host(cases_project, gpus=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    result = sharded_run(cases_project, "--benchmark-json=run.json")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    facts = json.loads((cases_project.path / "run.json").read_text())["machine_info"]["perfgate"]
    assert facts["gpu"] == {"index": 0, "physical_index": 1, "uuid": HOST_UUIDS[1],
                            "name": "NVIDIA H100 80GB HBM3"}  # fmt: skip
    health = facts["gpu_health"]
    assert health["trusted"] and health["clocks.sm"] == "1401", health  # GPU 1's, not GPU 0's


@pytest.mark.parametrize("visible", ["2,3", f"{HOST_UUIDS[2]},{HOST_UUIDS[3]}"])
@pytest.mark.slow
def test_xdist_workers_given_gpus_2_and_3_of_8_time_and_record_them(
    cases_project, monkeypatch, visible
):
    fake_cuda_host(cases_project, gpus=8)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    result = sharded_run(cases_project, "-p", "xdist", "-n", "2", "--benchmark-json=merged.json",
                         "--perf-lock-clocks")  # fmt: skip
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    locked = (cases_project.path / "locked.txt").read_text().split()
    assert sorted(locked) == ["2", "3"]  # each worker locks its own GPU's clocks
    merged = json.loads((cases_project.path / "merged.json").read_text())
    pinned = {(b["extra_info"]["worker"], b["extra_info"]["gpu"]["physical_index"],
               b["extra_info"]["gpu"]["uuid"]) for b in merged["benchmarks"]}  # fmt: skip
    assert pinned == {("gw0", 2, HOST_UUIDS[2]), ("gw1", 3, HOST_UUIDS[3])}
    facts = merged["machine_info"]["perfgate"]
    assert "gpu" not in facts  # two GPUs: each case says its own
    assert facts["gpu_health"]["trusted"], facts["gpu_health"]  # the job is on GPU 0
    clocks = {w: h["clocks.sm"] for w, h in facts["gpu_health"]["per_part"].items()}
    assert clocks == {"gw0": "1402", "gw1": "1403"}


def test_a_session_on_a_mig_instance_is_one_usage_line(cases_project, monkeypatch):
    fake_cuda_host(cases_project, gpus=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b")
    result = sharded_run(cases_project, "--perf-gate")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "CUDA device 0 is MIG instance MIG-1f2e3d4c" in output and "whole GPU" in output
    assert "Traceback" not in output and "INTERNALERROR" not in output
