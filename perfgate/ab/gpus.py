"""The GPUs an A/B spreads its blocks over, one lane of blocks per GPU, each named by its UUID
(``measure.gpu.usable_gpus``: what CUDA_VISIBLE_DEVICES leaves this process, read through NVML
without starting CUDA); without NVML, the devices CUDA_VISIBLE_DEVICES lists."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from perfgate.ab import AbError


def usable(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The UUIDs of the GPUs this process may use; without NVML, CUDA_VISIBLE_DEVICES's list."""
    from perfgate.measure import gpu

    try:
        found = [device.uuid for device in gpu.usable_gpus()]
    except gpu.GpuError as error:
        raise AbError(str(error)) from None
    listed = environ.get("CUDA_VISIBLE_DEVICES", "")
    return found or [entry.strip() for entry in listed.split(",") if entry.strip()]


def lanes(
    spec: str | None,
    environ: Mapping[str, str] = os.environ,
    found: Callable[[], list[str]] | None = None,
) -> list[str | None]:
    """The GPUs to give the block processes, each as CUDA_VISIBLE_DEVICES names it; ``[None]``
    is one lane that sets no GPU (a CPU run, or the one GPU there is).

    ``spec``: None or ``auto``: every usable GPU (``found``, default ``usable``) where there are
    several, else one lane; ``N``: the first N of them (GPUs 0 to N-1 where none is known);
    ``0,2`` or ``GPU-...,GPU-...``: those."""
    text = (spec or "auto").strip()
    if text == "auto":
        devices = found() if found else usable(environ)
        return list(devices) if len(devices) > 1 else [None]
    if text.isdigit():
        count = int(text)
        if count < 1:
            raise AbError(f"--gpus {text}: give 1 or more, a list such as 0,1, or auto")
        devices = found() if found else usable(environ)
        if devices and count > len(devices):
            raise AbError(
                f"--gpus {count}: this process may use {len(devices)} GPUs "
                f"({','.join(devices)}); give {len(devices)} or fewer"
            )
        if not devices:
            return [str(i) for i in range(count)] if count > 1 else [None]
        return devices[:count] if count > 1 or len(devices) > 1 else [None]
    listed = [d.strip() for d in text.split(",")]
    if "" in listed or len(set(listed)) != len(listed):
        raise AbError(f"--gpus {text!r}: a count, auto, or a list of distinct GPUs such as 0,1")
    return listed
