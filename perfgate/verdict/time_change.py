"""Whether the rounds of two sides show a time change past a threshold: slower
(``TimeRegression``), faster (``TimeImprovement``), or neither shown nor excluded (``undecided``).
The time rules of ``verdict.rules`` decide through these, on any ``Comparison`` (rounds of two
runs, or block pairs of an A/B)."""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.stats import MIN_PAIRS, MIN_ROUNDS, Comparison, rounds_needed
from perfgate.verdict.reason import Reason
from perfgate.verdict.thresholds import (
    DEFAULT_ALPHA,
    DEFAULT_TIME_THRESHOLD,
    TIME_UPPER,
    check_fraction,
)

TOO_FEW_ROUNDS = "too few rounds to decide"  # the not-gated reason, counted in the summary


@dataclass(frozen=True)
class _TimeRule:
    threshold: float = DEFAULT_TIME_THRESHOLD  # fraction of the baseline median
    alpha: float = DEFAULT_ALPHA  # one-sided significance level

    def __post_init__(self) -> None:
        check_fraction(self.threshold, "threshold", upper=TIME_UPPER)
        check_fraction(self.alpha, "alpha")

    def testable(self, c: Comparison) -> bool:
        """Whether these rounds can reach significance at all (Mann-Whitney needs 5 rounds a
        side for p < 0.01; the paired t-test 3 pairs)."""
        return c.smallest_p < self.alpha

    def untested(self, c: Comparison) -> str:
        return f"decided on {c.rounds} without a significance test"


# Deciding without a test, by simulation (lognormal rounds, threshold 10 %, one comparison, no
# re-run): the same distribution reads as a regression on 3 vs 3 rounds at 1e-4 of comparisons
# with 5 % noise per round, 0.4 % with 10 %, 2 % with 30 % (4 vs 4: 0, 0.05 %, 0.5 %); the gate
# then re-runs it, and both must fail. A 2x slowdown is caught every time up to 10 % noise; with
# more noise it is otherwise not gated, never unchanged.
def _decidable_without_test(c: Comparison) -> bool:
    return min(c.n_baseline, c.n_current) >= (MIN_PAIRS if c.paired else MIN_ROUNDS)


class TimeRegression(_TimeRule):
    """Slower than the baseline beyond ``threshold`` (fraction), and shown so: where the rounds
    can reach significance, ratio of medians > 1 + threshold, one-sided Mann-Whitney (paired:
    t-test) p < ``alpha`` and the ratio interval above 1; where they cannot, every current round
    slower than every baseline round (paired: every block pair) by more than the threshold."""

    def fails(self, comparison: Comparison) -> str | None:
        # Why both tests: the threshold is a size filter, not a test, and each test can be fooled
        # alone on a noisy machine. Mann-Whitney counts every round as independent evidence, so
        # a slow phase that shifts a block of rounds gives it a tiny p-value; the bootstrap
        # interval of a median is too narrow with few rounds. A false alarm must fool both at
        # once and pass the threshold, while a real slowdown past the threshold passes all three.
        c, limit = comparison, 1.0 + self.threshold
        if not self.testable(c):
            if not _decidable_without_test(c) or c.round_ratio_low <= limit:
                return None
            every = "every current block is slower than its pair" if c.paired else (
                "every current round is slower than every baseline round")  # fmt: skip
            return (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}): "
                f"{every} by at least {c.round_ratio_low - 1:.1%}, {self.untested(c)}: "
                f"{c.describe()}"
            )
        if c.ratio <= limit or c.p_value >= self.alpha or c.ratio_low <= 1.0:
            return None
        return (
            f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}, "
            f"p={c.p_value:.2g}): {c.describe()}"
        )

    def undecided(self, comparison: Comparison) -> tuple[Reason, str] | None:
        """Why the rounds show neither a slowdown past the threshold nor its absence (the reason
        and its words), or None:
        a median slower past the threshold without significance, or too few rounds for a test
        and rounds that overlap. Such a case is not gated: never called unchanged."""
        c, limit = comparison, 1.0 + self.threshold
        if self.fails(c) is not None:
            return None
        if self.testable(c):
            if c.ratio <= limit:
                return None
            return Reason.NOT_SIGNIFICANT, (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}) but not "
                f"significantly (p={c.p_value:.2g}, ratio {c.confidence:.0%} CI "
                f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]) on {c.rounds}: too noisy to decide"
            )
        if _decidable_without_test(c) and c.round_ratio_high <= limit:
            return None  # no current round is slower than any baseline round past the threshold
        return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({c.rounds}, needs {self._needs(c)})"

    def _needs(self, c: Comparison) -> str:
        if c.paired:
            return f"{MIN_PAIRS} pairs, {MIN_ROUNDS} for a t-test"
        if not _decidable_without_test(c):
            return f"{MIN_ROUNDS} a side"
        return f"{rounds_needed(self.alpha)} a side for p < {self.alpha:g}"


class TimeImprovement(_TimeRule):
    """Mirror of ``TimeRegression``: ratio < 1 - threshold, one-sided "faster" p < ``alpha``,
    interval below 1; without a possible test, every current round faster than every baseline
    round by more than the threshold."""

    def fails(self, comparison: Comparison) -> str | None:
        c = comparison
        if not self.testable(c):
            if not _decidable_without_test(c) or c.round_ratio_high >= 1.0 - self.threshold:
                return None
            return f"faster by {-c.change_percent:.1f}%, {self.untested(c)}: {c.describe()}"
        if c.ratio >= 1.0 - self.threshold or c.p_value_faster >= self.alpha or c.ratio_high >= 1:
            return None
        return f"faster by {-c.change_percent:.1f}% (p={c.p_value_faster:.2g}): {c.describe()}"
