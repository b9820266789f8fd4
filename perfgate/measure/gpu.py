"""The GPU this process times on: the device torch's ``"cuda"`` means, found in NVML by its UUID.

CUDA numbers the GPUs a process may use (``CUDA_VISIBLE_DEVICES``, by index or UUID, in
``CUDA_DEVICE_ORDER``: fastest first unless PCI_BUS_ID); NVML numbers every GPU of the host in
PCI bus order, as nvidia-smi does. The two meet by UUID, never by index arithmetic: ``select``
gives NVML the UUID of torch's device, so the clocks, the health, the other processes and the
GPU recorded with the run are that device's, in a single process, in each pytest-xdist worker
(``pin``: worker ``gwK`` on CUDA device K), in shards and in A/B block sessions alike.
``usable_gpus`` lists the GPUs a process may hand to child processes, one each
(``child_environment``).

The logic takes ``cuda`` (``torch.cuda`` or a fake with ``device_count``, ``set_device``,
``get_device_name`` and ``get_device_properties``) and ``nvml`` (``perfgate.measure.nvml`` or
a fake), so it is tested without a GPU.
"""

from __future__ import annotations

import os

import pytest

from perfgate.fields import Gpu
from perfgate.measure import nvml as host_nvml
from perfgate.measure.nvml import HostGpu

NOT_MIG = (
    "a MIG instance shares its GPU's clocks, power and memory system with the other "
    "instances, so its timings cannot be gated; give this process a whole GPU "
    "(CUDA_VISIBLE_DEVICES=GPU-<uuid> or an index, from nvidia-smi -L)"
)


class GpuError(ValueError):
    """A GPU this process cannot time on, or a CUDA_VISIBLE_DEVICES naming none: one line."""


def worker_number(worker: str) -> int:
    """K of pytest-xdist's worker id ``gwK``."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise pytest.UsageError(f"pytest-xdist worker id {worker!r} is not gwN; run with -n N")
    return int(worker[2:])


def check_worker_count(workers: int, gpus: int) -> None:
    """A usage error unless every worker can have a GPU of its own."""
    if gpus < 1:
        raise pytest.UsageError(
            "--device cuda under pytest-xdist: no CUDA device here; run "
            "without -n, or on a machine with GPUs"
        )
    if workers > gpus:
        raise pytest.UsageError(
            f"-n {workers} with {gpus} GPUs: each worker times on a GPU of its own, so run "
            f"-n {gpus} or fewer (-n auto is one worker per GPU)"
        )


def visible_entries(visible: str | None) -> list[str] | None:
    """The entries of a CUDA_VISIBLE_DEVICES value, up to the first negative index (CUDA's way
    to hide the rest: ``-1`` hides every GPU); None when it is unset (every GPU)."""
    if visible is None:
        return None
    entries = []
    for entry in (part.strip() for part in visible.split(",")):
        if entry.startswith("-"):
            break
        if entry:
            entries.append(entry)
    return entries


def visible_gpus(
    visible: str | None, host: list[HostGpu], order: str | None = None
) -> list[HostGpu]:
    """The GPUs of ``host`` (NVML's list) that CUDA_VISIBLE_DEVICES ``visible`` leaves a process,
    in its order; all of them when it is unset. An index is NVML's (PCI bus order: CUDA's own
    under ``order`` CUDA_DEVICE_ORDER=PCI_BUS_ID, and under CUDA's default on a host of one GPU
    model); a UUID may be cut short where CUDA allows it (``GPU-5f11``, if no other GPU's UUID
    starts so). GpuError, one line: a MIG instance, an entry that names no GPU of the host or
    more than one, a GPU named twice, or indices on a host of two GPU models in CUDA's default
    order (fastest first, which nvidia-smi's numbering does not follow)."""
    entries = visible_entries(visible)
    if entries is None:
        return list(host)
    where = f"CUDA_VISIBLE_DEVICES={visible!r}"
    if order != "PCI_BUS_ID" and any(e.isdigit() for e in entries) and _models(host) > 1:
        raise GpuError(
            f"{where} gives indices on a host of several GPU models: CUDA numbers "
            "them fastest first, nvidia-smi by PCI bus; set CUDA_DEVICE_ORDER="
            "PCI_BUS_ID or name the GPUs by UUID (nvidia-smi -L)"
        )
    gpus = [_named(entry, host, where) for entry in entries]
    for number, gpu in enumerate(gpus):
        if gpu in gpus[:number]:
            raise GpuError(f"{where} names GPU {gpu.index} ({gpu.uuid}) twice; name each once")
    return gpus


def _models(host: list[HostGpu]) -> int:
    return len({gpu.name for gpu in host})


def _named(entry: str, host: list[HostGpu], where: str) -> HostGpu:
    if entry.upper().startswith("MIG-"):
        raise GpuError(f"{where} names MIG instance {entry}: {NOT_MIG}")
    if entry.isdigit():
        found = [gpu for gpu in host if gpu.index == int(entry)]
    elif entry.upper().startswith("GPU-"):
        found = [gpu for gpu in host if gpu.uuid.lower().startswith(entry.lower())]
    else:
        found = []
    if len(found) != 1:
        which = "no GPU" if not found else f"{len(found)} GPUs"
        raise GpuError(
            f"{where}: {entry!r} names {which} of this host's {len(host)} "
            "(nvidia-smi -L lists them by index and UUID)"
        )
    return found[0]


def usable_gpus() -> list[HostGpu]:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES, else all), each with its NVML
    index, UUID and name: a parent gives each child process one (``child_environment``).
    Empty without NVML (``pip install 'perfgate[gpu]'``) or without a GPU; GpuError, one line,
    as ``visible_gpus`` says. Reads no CUDA: the parent need not start it."""
    host = host_nvml.host_gpus()
    if not host:
        return []
    environ = os.environ
    return visible_gpus(environ.get("CUDA_VISIBLE_DEVICES"), host, environ.get("CUDA_DEVICE_ORDER"))


def child_environment(gpu: HostGpu) -> dict[str, str]:
    """Environment entries that give a child process ``gpu`` and no other: by its UUID, so it
    is the child's CUDA device 0 and the GPU it reads through NVML (``select``)."""
    return {"CUDA_VISIBLE_DEVICES": gpu.uuid}


def cuda_uuid(cuda, logical: int) -> str:
    """NVML's form ("GPU-<uuid>") of the UUID of CUDA device ``logical`` (torch's is bare)."""
    uuid = str(cuda.get_device_properties(logical).uuid)
    return uuid if uuid.upper().startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def select(logical: int, cuda=None, nvml=None) -> dict:
    """Make CUDA device ``logical`` the GPU this process reads through NVML (clocks, health,
    other processes, locked clocks), matched by UUID; returns what the run records of it
    (``fields.Gpu``: CUDA's and NVML's index, UUID, name). GpuError for a MIG instance."""
    cuda, nvml = _modules(cuda, nvml)
    named = visible_entries(os.environ.get("CUDA_VISIBLE_DEVICES")) or []
    uuid = cuda_uuid(cuda, logical)
    host = {gpu.uuid: gpu for gpu in nvml.host_gpus()}
    mig = next((entry for entry in named if entry.upper().startswith("MIG-")), None)
    bare = uuid.removeprefix("GPU-")  # not a whole GPU of the host: a MIG instance's?
    if mig is None and host and uuid not in host and nvml.is_mig_instance(bare):
        mig = f"MIG-{bare}"
    if mig is not None:
        raise GpuError(f"CUDA device {logical} is MIG instance {mig}: {NOT_MIG}")
    nvml.select(uuid)
    found = host.get(uuid)
    return {
        Gpu.INDEX: logical,
        Gpu.PHYSICAL_INDEX: found.index if found else None,
        Gpu.UUID: uuid,
        Gpu.NAME: cuda.get_device_name(logical),
    }


def pin(worker: str, cuda=None, nvml=None) -> dict:
    """Make CUDA device K pytest-xdist worker ``gwK``'s (``"cuda"`` means it from now on) and
    the GPU it reads (``select``); returns what the run records about it."""
    cuda, nvml = _modules(cuda, nvml)
    number = worker_number(worker)
    check_worker_count(number + 1, cuda.device_count())
    cuda.set_device(number)
    return select(number, cuda, nvml)


def current(cuda=None, nvml=None) -> dict | None:
    """``select`` of torch's current CUDA device; None without one."""
    cuda, nvml = _modules(cuda, nvml)
    return select(cuda.current_device(), cuda, nvml) if cuda.is_available() else None


def _modules(cuda, nvml):
    if cuda is None:
        import torch

        cuda = torch.cuda
    return cuda, nvml or host_nvml


def device_count() -> int:
    import torch

    return torch.cuda.device_count()
