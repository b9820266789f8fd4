"""Power-limited cases: marked, explained, and still gated.

A case whose rounds ran at reduced SM clocks (``nvml.RoundClocks``) more often than
REDUCED_CLOCK_SHARE is marked power-limited. It is still gated: the H100 holds its compute-heavy
kernels below the top clock by power every time, by design (issue 23), so dropping them would
leave them ungated for good. The mark explains a change; the nightly's interleaved A/B
(``perfgate nightly``), where both sides see the same power behaviour, confirms them.
"""

from __future__ import annotations

from perfgate.benchmark import Benchmark
from perfgate.fields import REDUCED_CLOCK_FRACTION, Gpu

REDUCED_CLOCK_SHARE = 0.2


def clocks_note(before: Benchmark, now: Benchmark) -> str | None:
    """'power-limited: ...' when the baseline or the current run ran more than
    REDUCED_CLOCK_SHARE of its rounds below REDUCED_CLOCK_FRACTION of its highest SM clock,
    else None."""
    parts = []
    for side, benchmark in (("baseline", before), ("current run", now)):
        reduced = benchmark.reduced_clock_rounds
        if benchmark.samples and reduced > REDUCED_CLOCK_SHARE * len(benchmark.samples):
            parts.append(
                f"the {side} ran {reduced} of {len(benchmark.samples)} rounds below "
                f"{REDUCED_CLOCK_FRACTION * 100:g} % of its "
                "highest SM clock"
            )
    return "power-limited: " + "; ".join(parts) if parts else None


def gpu_note(before: Benchmark, now: Benchmark) -> str | None:
    """'compared across two GPUs: ...' when both runs record the GPU that timed the case
    (``Benchmark.gpu``: a worker's, else the run's) and they are two physical GPUs, else None."""
    gpus = [benchmark.gpu for benchmark in (before, now)]
    if not all(isinstance(gpu, dict) for gpu in gpus):
        return None
    ids = [gpu.get(Gpu.UUID) or gpu.get(Gpu.PHYSICAL_INDEX, gpu.get(Gpu.INDEX)) for gpu in gpus]
    if ids[0] == ids[1]:
        return None
    shown = [_gpu_words(gpu) for gpu in gpus]
    return f"compared across two GPUs of one model: baseline on {shown[0]}, now on {shown[1]}"


def _gpu_words(gpu: dict) -> str:
    """'GPU 1 (GPU-5f11...)', or the UUID alone where no index was recorded (no NVML)."""
    index = gpu.get(Gpu.PHYSICAL_INDEX, gpu.get(Gpu.INDEX))
    uuid = gpu.get(Gpu.UUID) or "no UUID"
    return f"GPU {index} ({uuid})" if index is not None else uuid
