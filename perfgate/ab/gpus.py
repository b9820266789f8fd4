"""The GPUs an A/B spreads its blocks over, one lane of blocks per GPU. One function, to be
swapped for the measure stage's list of this process's usable GPUs (by UUID) once it is there."""

from __future__ import annotations

import os
from collections.abc import Mapping

from perfgate.ab import AbError


def lanes(spec: str | None, environ: Mapping[str, str] = os.environ) -> list[str | None]:
    """The GPUs to give the block processes, each as CUDA_VISIBLE_DEVICES names it (an index or
    a UUID); ``[None]`` is one lane that sets no GPU (a CPU run, or the one GPU there is).

    ``spec``: None or ``auto``: the devices of CUDA_VISIBLE_DEVICES where it lists several,
    else one lane; ``N``: the first N of them (or GPUs 0 to N-1 where it is unset); ``0,2`` or
    ``GPU-...,GPU-...``: those."""
    visible = [d.strip() for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    text = (spec or "auto").strip()
    if text == "auto":
        return list(visible) if len(visible) > 1 else [None]
    if text.isdigit():
        count = int(text)
        if count < 1:
            raise AbError(f"--gpus {text}: give 1 or more, a list such as 0,1, or auto")
        if visible and count > len(visible):
            raise AbError(f"--gpus {count}: CUDA_VISIBLE_DEVICES lists {len(visible)} "
                          f"({','.join(visible)}); give {len(visible)} or fewer")  # fmt: skip
        if count == 1:
            return [visible[0]] if visible else [None]
        return visible[:count] if visible else [str(i) for i in range(count)]
    listed = [d.strip() for d in text.split(",")]
    if "" in listed or len(set(listed)) != len(listed):
        raise AbError(f"--gpus {text!r}: a count, auto, or a list of distinct GPUs such as 0,1")
    return listed
