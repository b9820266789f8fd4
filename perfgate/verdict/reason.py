"""Why a case measured on both sides is not gated, or undecided: one value per reason, which the
judge returns and every reader acts on (the nightly, the summary's counts); the words for people
are in the verdict's message. Undecided: ``TOO_FEW_ROUNDS``, ``NOT_SIGNIFICANT``,
``WIDE_INTERVAL`` (the data compared, neither showing a change nor ruling one out), ``STOPPED``,
``MACHINE_MOVED``."""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    """Why a case measured on both sides is not gated: a value to act on, never a sentence to
    compare (``GateResult.message`` says it in words)."""

    UNTRUSTED_GPU = "untrusted GPU"  # throttling or other processes on a side's GPU
    HOST_BOUND = "host-bound"  # its time follows host jitter (and no launch counts to judge)
    OTHER_CODE = "other code ran"  # a run-time choice (autotuning, dispatch) differs
    NO_DATA = "no per-round data"
    TOO_FEW_ROUNDS = "too few rounds to decide"
    TOO_NOISY = "too noisy"  # its noise needs a threshold past the ceiling, and it is within it
    NOT_SIGNIFICANT = "not significant"  # slower past the threshold, not shown to be
    WIDE_INTERVAL = "interval wider than the threshold"  # neither a change nor its absence shown
    STOPPED = "stopped before it was measured"  # an A/B that stopped before its first pair
    MACHINE_MOVED = "the session moved more than its threshold"  # its cases' spread is the bar
    COUNTED_OTHERWISE = "counted another way"  # instruction counts left out other functions

    def __str__(self) -> str:
        return self.value
