"""The GPU a process times on (``measure.gpu``), on fake hosts of 1, 2, 4 and 8 GPUs: the device
torch uses, found in NVML by UUID, whatever CUDA_VISIBLE_DEVICES says (by index or UUID) and
whatever order CUDA numbers the GPUs in; its clocks, health and other processes, and no other
GPU's. A fake ``pynvml`` (tests/helpers.py) stands for the host, ``FakeCuda`` for torch.cuda."""

from __future__ import annotations

import os
import sys
import types

import pytest
from helpers import HOST_UUIDS, FakeCuda, install_fake_pynvml

from perfgate.measure import gpu, machine, nvml
from perfgate.measure.nvml import HostGpu

H100 = "NVIDIA H100 80GB HBM3"


def host(count: int, names: list[str] | None = None) -> list[HostGpu]:
    names = names or [H100] * count
    return [HostGpu(i, HOST_UUIDS[i], names[i]) for i in range(count)]


def indices(gpus: list[HostGpu]) -> list[int]:
    return [g.index for g in gpus]


# --- CUDA_VISIBLE_DEVICES against NVML's list of the host (pure) --------------------------------
@pytest.mark.parametrize(
    "count, visible, expected",
    [
        (1, None, [0]),
        (2, None, [0, 1]),
        (8, None, list(range(8))),
        (2, "1", [1]),
        (4, "3,1", [3, 1]),  # CUDA's order is the variable's
        (8, "2,3", [2, 3]),
        (8, " 6 , 7 ", [6, 7]),
        (2, HOST_UUIDS[1], [1]),
        (8, f"{HOST_UUIDS[2]},{HOST_UUIDS[3]}", [2, 3]),
        (8, "GPU-5f11", [1]),  # a unique start of a UUID, as CUDA takes it
        (8, "gpu-C4B8", [3]),
        (4, f"{HOST_UUIDS[3]},0", [3, 0]),
        (8, "0,-1,1", [0]),  # a negative index hides the rest
        (8, "-1", []),
        (8, "", []),
    ],
)
def test_the_gpus_cuda_visible_devices_leaves(count, visible, expected):
    assert indices(gpu.visible_gpus(visible, host(count))) == expected


@pytest.mark.parametrize(
    "count, visible, line",
    [
        (8, "8", "CUDA_VISIBLE_DEVICES='8': '8' names no GPU of this host's 8 (nvidia-smi -L"),
        (2, "0,9", "'9' names no GPU of this host's 2"),
        (8, "GPU-ffff", "'GPU-ffff' names no GPU of this host's 8"),
        (8, "GPU-", "'GPU-' names 8 GPUs of this host's 8"),
        (4, "cuda:1", "'cuda:1' names no GPU"),
        (4, "1,1", "names GPU 1 (GPU-5f11b2c4-8e3a-4f9b-b2c3-d4e5f6a70002) twice"),
        (4, f"1,{HOST_UUIDS[1]}", "names GPU 1 (GPU-5f11"),
        (8, "MIG-1f2e3d4c-0000-4000-8000-000000000001", "names MIG instance MIG-1f2e3d4c"),
    ],
)
def test_a_cuda_visible_devices_that_names_no_whole_gpu_is_one_line(count, visible, line):
    with pytest.raises(gpu.GpuError) as refused:
        gpu.visible_gpus(visible, host(count))
    message = str(refused.value)
    assert line in message and "\n" not in message


def test_a_mig_instance_is_refused_with_what_to_do_instead():
    with pytest.raises(gpu.GpuError, match="MIG instance") as refused:
        gpu.visible_gpus("MIG-GPU-90e5c3a1-7d2b-4e8f-a1b2-c3d4e5f60001/1/0", host(2))
    assert "give this process a whole GPU (CUDA_VISIBLE_DEVICES=GPU-<uuid>" in str(refused.value)


def test_indices_on_a_host_of_two_models_need_pci_bus_order():
    mixed = host(4, [H100, H100, "NVIDIA H200", "NVIDIA H200"])
    with pytest.raises(gpu.GpuError, match="set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs"):
        gpu.visible_gpus("2,3", mixed)  # CUDA numbers the faster H200s first here
    assert indices(gpu.visible_gpus("2,3", mixed, "PCI_BUS_ID")) == [2, 3]
    assert indices(gpu.visible_gpus(f"{HOST_UUIDS[2]}", mixed)) == [2]  # UUIDs need no order
    assert indices(gpu.visible_gpus(None, mixed)) == [0, 1, 2, 3]


# --- this process's GPU: torch's device, matched by UUID ---------------------------------------
CASES = [  # (host size, CUDA_VISIBLE_DEVICES, the physical GPUs CUDA leaves, in its order)
    (1, None, [0]),
    (2, "1", [1]),
    (2, HOST_UUIDS[1], [1]),
    (2, "GPU-5f11", [1]),
    (4, "3,1", [3, 1]),
    (8, "2,3", [2, 3]),
    (8, f"{HOST_UUIDS[7]},{HOST_UUIDS[4]}", [7, 4]),
]


@pytest.mark.parametrize("count, visible, physical", CASES)
def test_a_process_reads_the_gpu_torch_uses_and_a_busy_other_gpu_leaves_it_trusted(
    monkeypatch, count, visible, physical
):
    others = [(1567, 1802, i) for i in range(count) if i != physical[0]]  # jobs on other GPUs
    clocks = {i: 1400 + i for i in range(count)}  # each GPU's own SM clock
    fake = install_fake_pynvml(monkeypatch, count, PROCESSES=others, SM_CLOCK_OF=clocks)
    set_visible(monkeypatch, visible)
    assert indices(gpu.visible_gpus(visible, host(count))) == physical  # the fake CUDA's view
    facts = gpu.current(FakeCuda([HOST_UUIDS[i] for i in physical]))
    assert facts == {"index": 0, "physical_index": physical[0], "uuid": HOST_UUIDS[physical[0]],
                     "name": H100}  # fmt: skip
    health = machine.gpu_health()
    assert health["trusted"] and health["other_processes"] == [], health
    assert health["clocks.sm"] == str(1400 + physical[0])  # this GPU's clock
    fake.PROCESSES = [*others, (4242, 1024, physical[0]), (os.getpid(), 700, physical[0])]
    health = machine.gpu_health()
    assert not health["trusted"]  # a process on this GPU distrusts it; this process does not
    assert health["untrusted_reasons"] == ["other processes on the GPU: pid 4242 (1024 MiB)"]


def test_every_round_clock_is_read_on_the_gpu_torch_uses(monkeypatch):
    # the host: CUDA_VISIBLE_DEVICES=1 of 2 GPUs, another job holds GPU 0 at a low clock
    install_fake_pynvml(monkeypatch, 2, SM_CLOCK_OF={0: 1410, 1: 1980},
                        PROCESSES=[(1567, 1802, 0)])  # fmt: skip
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert nvml.device().sm_clock_mhz() == 1410  # unselected, NVML's GPU 0: the wrong card
    gpu.current(FakeCuda([HOST_UUIDS[1]]))
    clocks = nvml.round_clocks()
    timer = clocks.wrap(iter(range(100)).__next__)
    for _ in range(14):  # pytest-benchmark reads its timer twice a round: 2 warm-up + 5 rounds
        timer()
    assert clocks.facts(rounds=5) == {"sm_clock_mhz": [1980] * 5, "reduced_clock_rounds": 0}
    assert machine.gpu_health()["trusted"]


def test_cuda_numbering_the_gpus_in_another_order_than_nvml_is_matched_by_uuid(monkeypatch):
    # CUDA_DEVICE_ORDER=FASTEST_FIRST (CUDA's default) may put NVML's GPU 1 first
    install_fake_pynvml(monkeypatch, 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cuda = FakeCuda([HOST_UUIDS[1], HOST_UUIDS[0]])
    assert gpu.current(cuda)["physical_index"] == 1 and nvml.device().uuid() == HOST_UUIDS[1]
    cuda.set_device(1)
    assert gpu.current(cuda)["physical_index"] == 0 and nvml.device().uuid() == HOST_UUIDS[0]


MIG = "MIG-1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b"


@pytest.mark.parametrize("named", [True, False])
def test_a_mig_instance_is_refused_in_one_line(monkeypatch, named):
    install_fake_pynvml(monkeypatch, 2, MIG_INSTANCES=[MIG])
    set_visible(monkeypatch, MIG if named else None)  # unnamed: the GPU's MIG mode gives one
    with pytest.raises(gpu.GpuError) as refused:
        gpu.current(FakeCuda([MIG]))
    message = str(refused.value)
    assert message.startswith(f"CUDA device 0 is MIG instance {MIG}: a MIG instance shares")
    assert "\n" not in message and nvml.selected() == 0  # nothing selected


def test_without_nvml_the_uuid_still_names_the_gpu_to_nvidia_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    monkeypatch.setattr(nvml, "_key", 0)
    nvml.forget()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    facts = gpu.current(FakeCuda([HOST_UUIDS[1]]))
    assert facts["uuid"] == HOST_UUIDS[1] and facts["physical_index"] is None  # NVML's: unknown
    assert gpu.usable_gpus() == []
    asked = []
    own = os.getpid()
    answers = {
        "--query-gpu": f"{H100}, 580.1, 41, 1980, 1980, 2619, 300.0, 7, 0x4",
        "--query-compute-apps": f"{own}, python, 700\n{own}0, python, 900",
    }

    def nvidia_smi(arguments, **kwargs):
        asked.append(arguments[1])
        return types.SimpleNamespace(stdout=answers[arguments[2].split("=")[0]])

    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(machine.subprocess, "run", nvidia_smi)
    health = machine.gpu_health()
    assert asked == [f"--id={HOST_UUIDS[1]}"] * 2  # this GPU's fields and processes only
    assert health["other_processes"] == [f"{own}0, python, 900"]  # not this process
    assert not health["trusted"]


@pytest.mark.parametrize("count, visible, physical", CASES)
def test_a_parent_gives_each_child_one_usable_gpu_by_its_uuid(
    monkeypatch, count, visible, physical
):
    install_fake_pynvml(monkeypatch, count)
    set_visible(monkeypatch, visible)
    usable = gpu.usable_gpus()
    assert [(g.index, g.uuid) for g in usable] == [(i, HOST_UUIDS[i]) for i in physical]
    for given in usable:  # in the child: the one GPU, its CUDA device 0, read through NVML
        environment = gpu.child_environment(given)
        assert environment == {"CUDA_VISIBLE_DEVICES": given.uuid}
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", environment["CUDA_VISIBLE_DEVICES"])
        assert gpu.visible_gpus(os.environ["CUDA_VISIBLE_DEVICES"], host(count)) == [given]
        assert gpu.current(FakeCuda([given.uuid]))["physical_index"] == given.index
        assert nvml.device().uuid() == given.uuid


def set_visible(monkeypatch, visible):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
