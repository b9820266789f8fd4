"""How a session of wall-timed cases moved against its baseline, as a whole: a machine-wide shift
and the spread of the cases' changes. On a busy shared runner a case's time in one session can
differ from its baseline by far more than the baseline's own rounds say (seen on 2 cores beside
other jobs: -45 % to +91 % between sessions of unchanged code, docs/gate-validation/
cpu-shared-runner/), and the gate's re-run, minutes later under the same load, repeats it. But
there the machine runs a case slowly more often, in rounds up to about twice as long; it seldom
slows the case's fastest rounds, and a change of the code slows them all: in 20 such sessions of
cattrs, 265 of 280 cases' fastest rounds moved by 5 % or less (one by +49 %) where their medians
moved by -48 % to +90 % (kornia's, milliseconds of torch a call: half within 5 %). So with at
least MIN_CASES wall-timed cases, a slower case is also judged against the session on its
fastest rounds (``Shift``; ``Comparison.fastest_ratio``):

- divided by the session's median change of the fastest rounds, when so many cases ran slower
  than chance allows (a one-sided sign test at SIGN_ALPHA): the machine ran slower, not every
  case's code;
- its fastest rounds slower past its threshold, and at least SPREAD_MULTIPLIER robust standard
  deviations of the cases' changes of their fastest rounds: it must stand out from how the
  session's cases moved.

It is a regression only when it is slower past its threshold both against the baseline and
against the session, on its first run and on its re-run (a neighbour's burst that slowed every
round of one case once is not repeated by the re-run; a change of its code is). A slowdown of
one case among many still fails; a change that slows most cases alike reads as the machine
(count instructions to see such a change: they do not move), and so does a slowdown that leaves
a case's fastest rounds where they were. Device-timed kernels are left out: their sessions
differ by about 1 %, and the nightly's A/B settles them. The rule, its constants and its rates
come from ``docs/gate-validation/scripts/shift_simulation.py`` (tests/test_verdict_shift.py) and
the loaded-machine runs of docs/gate-validation/cpu-shared-runner/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfgate.stats import Comparison
from perfgate.verdict.outcome import GateResult
from perfgate.verdict.reason import Reason

MIN_CASES = 8  # fewer cases than this cannot tell the machine from the code
SIGN_ALPHA = 0.01  # a shift: this few sessions of unchanged, unshifted cases would look so
SPREAD_MULTIPLIER = 4.0  # against the session, a case must stand out by 4 spreads of its changes
MAD_TO_SIGMA = 1.4826  # the median absolute deviation of a normal sample, in standard deviations


def fastest(comparison: Comparison) -> float:
    """How a case's fastest rounds moved: min(current) / min(baseline), or the medians' ratio
    where the comparison has no rounds to say it."""
    return comparison.fastest_ratio if math.isfinite(comparison.fastest_ratio) else comparison.ratio


@dataclass(frozen=True)
class Shift:
    """The session as a whole, on its cases' fastest rounds: ``factor`` their median current/
    baseline ratio where the cases ran slower together (else 1), ``spread`` the robust standard
    deviation of their log ratios, ``moved`` of ``cases`` slower than their baseline."""

    factor: float
    spread: float
    moved: int
    cases: int

    def threshold(self, own: float) -> float:
        """The threshold against the shift: the case's own, or the cases' spread if wider."""
        return max(own, math.exp(SPREAD_MULTIPLIER * self.spread) - 1.0)

    def stands_out(self, comparison: Comparison | None, own: float) -> bool:
        """The case's fastest rounds, divided by the shift, slower past its threshold against
        the session (a case without a comparison is judged on its medians alone)."""
        if comparison is None:
            return True
        return fastest(comparison) / self.factor > 1.0 + self.threshold(own)

    @property
    def together(self) -> bool:
        """The machine ran slower: most cases moved together."""
        return self.factor > 1.0

    def describe(self) -> str:
        bar = f"a case's fastest rounds must stand out by {self.threshold(0.0):.0%}"
        if self.together:
            return (
                f"the machine ran slower in this session: {self.moved} of {self.cases} "
                f"wall-timed cases' fastest rounds were slower than their baseline's, by "
                f"{self.factor - 1:+.1%} at the median (spread {self.spread:.1%}, so {bar}); "
                "each case is also judged against that shift"
            )
        return (
            f"this session's {self.cases} wall-timed cases' fastest rounds moved against their "
            f"baseline's with a spread of {self.spread:.1%}, so {bar}: a case slower than its "
            "threshold whose fastest rounds do not is not a change of its own"
        )

    def within(self, comparison: Comparison | None, own: float, label: str = "") -> str:
        """Why a case slower than its threshold is unchanged against the session; ``label``
        says which of its comparisons did not stand out ("on re-run, ")."""
        change = ""
        if comparison:
            change = (
                f"{label}slower by {comparison.change_percent:.1f}% at the median, its fastest "
                f"rounds by {fastest(comparison) - 1:+.1%}, "
            )
        bar = f"a change of its own moves them past {self.threshold(own):.0%}"
        if self.together:
            return (
                f"unchanged against the machine's shift ({change}with most cases: the session's "
                f"median {self.factor - 1:+.1%}, and {bar} more): not a change of its own"
            )
        return (
            f"unchanged against the session ({change}where {bar}): the busy machine ran it "
            "slowly more often, not a change of its own"
        )

    def cannot_tell(self, comparison: Comparison | None, own: float, label: str = "") -> str:
        """Why a case slower than its threshold is undecided against a session whose spread
        makes its bar looser than the case's own threshold."""
        moved = ""
        if comparison:
            moved = (
                f"{label}slower by {comparison.change_percent:.1f}% at the median, its fastest "
                f"rounds by {fastest(comparison) - 1:+.1%}; "
            )
        return (
            f"{moved}this session's cases moved so unevenly (spread {self.spread:.1%}) that a "
            f"change of its own shows only past {self.threshold(own):.0%}: a change of "
            f"{own:.0%} is neither shown nor ruled out. Run it again on a quieter machine"
        )

    def beyond(self) -> str:
        return (
            f"slower beyond the session's own movement too (its cases' fastest rounds: median "
            f"{self.factor - 1:+.1%}, spread {self.spread:.1%})"
        )


def judged_on_wall_time(result: GateResult, device_timed: bool) -> bool:
    """A case judged on wall-clock rounds (not counted, not on launch counts, not an A/B's
    pairs, not a device-timed kernel) against its baseline."""
    c = result.comparison
    if device_timed or c is None or c.paired or result.gated_on is not None:
        return False
    compared = (Reason.NOT_SIGNIFICANT, Reason.WIDE_INTERVAL, Reason.TOO_NOISY)
    return result.verdict.gated or result.reason in compared


def detect(results: list[GateResult]) -> Shift | None:
    """The session's movement from the first-pass verdicts of its wall-timed cases, or None with
    fewer than MIN_CASES: the median ratio of their fastest rounds where so many cases' fastest
    rounds ran slower than their baseline's that a sign test rejects "each as likely faster as
    slower" at SIGN_ALPHA (else 1), and the robust spread of those log ratios."""
    if len(results) < MIN_CASES:
        return None
    logs = np.log([fastest(r.comparison) for r in results])
    center = float(np.median(logs))
    moved = int(np.sum(logs > 0.0))
    from scipy.stats import binomtest  # here: importing scipy.stats takes 1.5 s

    together = center > 0.0 and binomtest(moved, len(results), 0.5, "greater").pvalue < SIGN_ALPHA
    spread = MAD_TO_SIGMA * float(np.median(np.abs(logs - center)))
    return Shift(math.exp(center) if together else 1.0, spread, moved, len(results))
