"""One GPU per pytest-xdist worker: worker ``gwK`` times on GPU K and nothing else does.

The logic takes ``cuda`` (``torch.cuda`` or a fake with ``device_count``, ``set_device`` and
``get_device_name``) and ``nvml`` (``perfgate.measure.nvml``), so it is tested without a GPU.
"""

from __future__ import annotations

import os

import pytest

from perfgate.fields import Gpu


def worker_number(worker: str) -> int:
    """K of pytest-xdist's worker id ``gwK``."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise pytest.UsageError(f"pytest-xdist worker id {worker!r} is not gwN; run with -n N")
    return int(worker[2:])


def check_worker_count(workers: int, gpus: int) -> None:
    """A usage error unless every worker can have a GPU of its own."""
    if gpus < 1:
        raise pytest.UsageError("--device cuda under pytest-xdist: no CUDA device here; run "
                                "without -n, or on a machine with GPUs")  # fmt: skip
    if workers > gpus:
        raise pytest.UsageError(
            f"-n {workers} with {gpus} GPUs: each worker times on a GPU of its own, so run "
            f"-n {gpus} or fewer (-n auto is one worker per GPU)"
        )


def physical_index(logical: int, visible: str | None) -> int:
    """NVML's index of CUDA device ``logical`` under CUDA_VISIBLE_DEVICES (a list of indices;
    UUIDs or an unset variable: the same index)."""
    listed = [part.strip() for part in (visible or "").split(",") if part.strip()]
    if logical < len(listed) and listed[logical].isdigit():
        return int(listed[logical])
    return logical


def pin(worker: str, cuda=None, nvml=None) -> dict:
    """Make GPU K this worker's CUDA device (``"cuda"`` means it from now on) and its NVML
    device (clocks and health are read there); returns what the run records about it."""
    if cuda is None:
        import torch

        cuda = torch.cuda
    if nvml is None:
        from perfgate.measure import nvml
    number = worker_number(worker)
    check_worker_count(number + 1, cuda.device_count())
    cuda.set_device(number)
    physical = physical_index(number, os.environ.get("CUDA_VISIBLE_DEVICES"))
    nvml.select(physical)
    facts = {"worker": worker, Gpu.INDEX: number, Gpu.PHYSICAL_INDEX: physical,
             "name": cuda.get_device_name(number)}  # fmt: skip
    device = nvml.device()
    try:
        facts[Gpu.UUID] = device.uuid() if device is not None else None
    except device.nvml.NVMLError:
        facts[Gpu.UUID] = None
    return facts


def device_count() -> int:
    import torch

    return torch.cuda.device_count()
