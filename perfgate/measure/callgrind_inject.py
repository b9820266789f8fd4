"""Gate validation only: add a known share of instructions to every call of a case.

``PERFGATE_INJECT_INSTRUCTIONS=0.01`` makes the counting process count each case as usual, then
again with a ``zlib.crc32`` over a buffer after every call, the buffer sized so the extra work
is that fraction of the case's own count; ``PERFGATE_INJECT_MATCHING=TEXT`` injects only into
the tests whose id contains TEXT (the others are counted as usual). The crc32 is C code called
through a partial: it adds instructions and no Python call or ATen operator, so only the
instruction rule can catch it, and the function diff names it (``crc32_z``).
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable

INJECT_VARIABLE = "PERFGATE_INJECT_INSTRUCTIONS"
MATCHING_VARIABLE = "PERFGATE_INJECT_MATCHING"
CALIBRATION_BYTES = (4096, 65536)


def inject_fraction() -> float:
    """The fraction of instructions to inject (0 when the variable is unset)."""
    text = os.environ.get(INJECT_VARIABLE, "")
    try:
        value = float(text or 0)
    except ValueError:
        raise ValueError(f"{INJECT_VARIABLE}={text!r}: expected a fraction (0.01)") from None
    if not 0 <= value < 1:
        raise ValueError(f"{INJECT_VARIABLE}={text!r}: expected a fraction in [0, 1)")
    return value


def injects_into(test_id: str) -> bool:
    """Whether an injection (if any) goes into this test."""
    return os.environ.get(MATCHING_VARIABLE, "") in test_id


def crc32_cost(per_call: Callable[[Callable[[], object]], float]) -> tuple[float, float]:
    """(fixed, per byte) instructions of one crc32 call; ``per_call(call)`` counts one call."""
    small, large = (per_call(functools.partial(zlib.crc32, bytes(n))) for n in CALIBRATION_BYTES)
    per_byte = (large - small) / (CALIBRATION_BYTES[1] - CALIBRATION_BYTES[0])
    return small - per_byte * CALIBRATION_BYTES[0], per_byte


def injection(cost: tuple[float, float], target: float) -> tuple[Callable[[], object], int]:
    """A crc32 call of about ``target`` instructions, and its expected count."""
    fixed, per_byte = cost
    size = max(1, round((target - fixed) / per_byte))
    return functools.partial(zlib.crc32, bytes(size)), round(fixed + per_byte * size)
