"""A machine-wide shift: when most of a session's cases ran slower than their baseline (so many
that chance cannot explain it: a one-sided sign test), the machine ran slower (a busy shared
runner, another job beside it), not every case's code. Each case is then judged against that
shift as well: it is a regression only when it is slower past its threshold both against the
baseline and against the shift, with the threshold against the shift at least the spread of the
cases' own changes (a case must stand out from the others). A real slowdown of one case among
many still fails; a change that slows most cases alike reads as a shift (count instructions to
see such a change: they do not shift).

The rule, its constants and its false-alarm and miss rates come from simulations
(``tools/shift_simulation.py``, ``tests/test_verdict_shift.py``) and loaded-machine runs
(docs/gate-validation/cpu-shared-runner/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

from perfgate.stats import Comparison
from perfgate.verdict.outcome import GateResult
from perfgate.verdict.reason import Reason

MIN_CASES = 8  # fewer cases than this cannot tell the machine from the code
SIGN_ALPHA = 0.01  # a shift: this few sessions of unchanged, unshifted cases would look so
SPREAD_MULTIPLIER = 3.0  # against the shift, a case must stand out by 3 spreads of the changes
MAD_TO_SIGMA = 1.4826  # the median absolute deviation of a normal sample, in standard deviations


@dataclass(frozen=True)
class Shift:
    """The session's shift: ``factor`` the median current/baseline ratio of its timed cases,
    ``spread`` the robust standard deviation of their log ratios, ``moved`` of ``cases``
    slower than their baseline."""

    factor: float
    spread: float
    moved: int
    cases: int

    def threshold(self, own: float) -> float:
        """The threshold against the shift: the case's own, or the cases' spread if wider."""
        return max(own, math.exp(SPREAD_MULTIPLIER * self.spread) - 1.0)

    def describe(self) -> str:
        return (
            f"the machine ran slower in this session: {self.moved} of {self.cases} timed cases "
            f"were slower than their baseline, by {self.factor - 1:+.1%} at the median (spread "
            f"of their changes {self.spread:.1%}); each case is also judged against that shift"
        )

    def within(self, comparison: Comparison | None) -> str:
        change = f"slower by {comparison.change_percent:.1f}% " if comparison else ""
        return (
            f"unchanged against the machine's shift ({change}with most cases, the session's "
            f"median {self.factor - 1:+.1%}): not a change of its own"
        )

    def beyond(self) -> str:
        return (
            f"slower beyond the machine's shift too (the session's median {self.factor - 1:+.1%}, "
            f"spread {self.spread:.1%})"
        )


def _timed(result: GateResult) -> bool:
    """A case judged on its time rounds (not counted, not on launch counts, not paired)."""
    c = result.comparison
    if c is None or c.paired or result.gated_on is not None:
        return False
    return result.verdict.gated or result.reason in (Reason.NOT_SIGNIFICANT, Reason.TOO_NOISY)


def detect(results: list[GateResult]) -> Shift | None:
    """The session's shift from the first-pass verdicts of its cases, or None: at least
    MIN_CASES timed cases, so many of them slower than their baseline that a sign test rejects
    "each as likely faster as slower" at SIGN_ALPHA, and a median ratio above 1."""
    timed = [r for r in results if _timed(r)]
    if len(timed) < MIN_CASES:
        return None
    logs = np.log([r.comparison.ratio for r in timed])
    center = float(np.median(logs))
    moved = int(np.sum(logs > 0.0))
    if center <= 0.0 or binomtest(moved, len(timed), 0.5, "greater").pvalue >= SIGN_ALPHA:
        return None
    spread = MAD_TO_SIGMA * float(np.median(np.abs(logs - center)))
    return Shift(math.exp(center), spread, moved, len(timed))
