"""Whether the rounds of two sides show a time change past a threshold: slower
(``TimeRegression``), faster (``TimeImprovement``), no change of that size (``NoChange``: the
data rule it out), or none of these (undecided, with what more would decide it).
The time rules of ``verdict.rules`` decide through these, on any ``Comparison`` (rounds of two
runs, or block pairs of an A/B)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfgate.stats import MIN_ROUNDS, Comparison, rounds_needed
from perfgate.verdict.reason import Reason
from perfgate.verdict.thresholds import (
    DEFAULT_ALPHA,
    DEFAULT_TIME_THRESHOLD,
    TIME_UPPER,
    check_fraction,
)

TOO_FEW_ROUNDS = "too few rounds to decide"  # the not-gated reason, counted in the summary


def p_words(c: Comparison) -> str:
    """'p=0.0042', or 'p=0.36 (0.0042 alone, 86 cases tested together)'."""
    if c.tested <= 1 or c.p_raw is None:
        return f"p={c.p_value:.2g}"
    return f"p={c.p_value:.2g} ({c.p_raw:.2g} alone, {c.tested} cases tested together)"


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
# more noise it is otherwise undecided, never unchanged. Block pairs have no such shortcut: two
# pairs of blocks that scatter by +-30 % both read "slower" one time in four, and an A/B has no
# re-run behind it, so pairs are decided by their t-test alone (3 pairs or more).
def _decidable_without_test(c: Comparison) -> bool:
    return not c.paired and min(c.n_baseline, c.n_current) >= MIN_ROUNDS


class TimeRegression(_TimeRule):
    """Slower than the baseline beyond ``threshold`` (fraction), and shown so: where the rounds
    can reach significance, ratio of medians > 1 + threshold, one-sided Mann-Whitney (paired:
    t-test) p < ``alpha`` and the ratio interval above 1; where rounds (never block pairs) cannot,
    every current round slower than every baseline round by more than the threshold."""

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
            return (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}): every "
                f"current round is slower than every baseline round by at least "
                f"{c.round_ratio_low - 1:.1%}, {self.untested(c)}: {c.describe()}"
            )
        if c.ratio <= limit or c.p_value >= self.alpha or c.ratio_low <= 1.0:
            return None
        return (
            f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}, "
            f"{p_words(c)}): {c.describe()}"
        )

    def undecided(self, comparison: Comparison) -> tuple[Reason, str] | None:
        """Why the rounds show a slowdown past the threshold without showing it significantly
        (the reason and its words), or None: a median slower past the threshold without
        significance, or too few rounds (or pairs) for a test and rounds that overlap."""
        c, limit = comparison, 1.0 + self.threshold
        if self.fails(c) is not None:
            return None
        if self.testable(c):
            if c.ratio <= limit:
                return None
            return Reason.NOT_SIGNIFICANT, (
                f"slower by {c.change_percent:.1f}% (threshold {self.threshold:.0%}) but not "
                f"significantly ({p_words(c)}, ratio {c.confidence:.0%} CI "
                f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]) on {c.rounds}: "
                f"{more_evidence(c, self.threshold, self.alpha)}"
            )
        if _decidable_without_test(c) and c.round_ratio_high <= limit:
            return None  # no current round is slower than any baseline round past the threshold
        return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({c.rounds}, needs {self._needs(c)})"

    def _needs(self, c: Comparison) -> str:
        if c.paired:
            return f"{MIN_ROUNDS} pairs for a t-test"
        if not _decidable_without_test(c):
            return f"{MIN_ROUNDS} a side"
        return f"{rounds_needed(self.alpha)} a side for p < {self.alpha:g}"


class NoChange(_TimeRule):
    """Unchanged, shown: the data rule out a change of ``threshold`` either way (an equivalence
    statement). Where a test is possible, the ratio's interval lies inside [1 - threshold,
    1 + threshold]; where rounds (never pairs) are too few for one, every current round lies
    within the threshold of every baseline round. Against a baseline set, the slower side is
    bounded against the set's slowest run (``c``) and the faster side against its fastest
    (``faster``): a run inside the set's own spread is unchanged."""

    def shown(self, c: Comparison, faster: Comparison | None = None) -> bool:
        return self._bounds(c, faster) is None

    def not_shown(self, c: Comparison, faster: Comparison | None = None) -> tuple[Reason, str]:
        """Why ``c`` does not show the case unchanged (when ``shown`` is False): too few rounds
        or pairs, or an interval wider than the threshold, with what more would decide it."""
        bounds = self._bounds(c, faster)
        if bounds is None or bounds == "few":
            needs = f"{MIN_ROUNDS} pairs for a t-test" if c.paired else f"{MIN_ROUNDS} a side"
            return Reason.TOO_FEW_ROUNDS, f"{TOO_FEW_ROUNDS} ({c.rounds}, needs {needs})"
        seen, shown_by = bounds
        low, high = 1.0 - self.threshold, 1.0 + self.threshold
        return Reason.WIDE_INTERVAL, (
            f"{c.change_percent:+.1f}%, but {seen} does not rule out a change of "
            f"{self.threshold:.0%} (unchanged needs it inside [{low:.3f}, {high:.3f}]) on "
            f"{c.rounds}: {more_evidence(shown_by, self.threshold, self.alpha)}"
        )

    def _bounds(self, c: Comparison, faster: Comparison | None):
        """None where the data rule out a change; "few" where they cannot say; else the words
        for what they show and the comparison that falls short."""
        low, high = 1.0 - self.threshold, 1.0 + self.threshold
        against_set = faster is not None and faster is not c
        faster = faster or c
        if self.testable(c) and self.testable(faster):
            if faster.ratio_low >= low and c.ratio_high <= high:
                return None
            short = c if c.ratio_high > high else faster
            seen = f"its ratio's {c.confidence:.0%} CI [{c.ratio_low:.3f}, {c.ratio_high:.3f}]"
            if against_set:
                seen += (
                    f" against the set's slowest run, [{faster.ratio_low:.3f}, "
                    f"{faster.ratio_high:.3f}] against its fastest,"
                )
            return seen, short
        if _decidable_without_test(c) and _decidable_without_test(faster):
            if faster.round_ratio_low >= low and c.round_ratio_high <= high:
                return None
            spread = f"[{faster.round_ratio_low:.3f}, {c.round_ratio_high:.3f}]"
            return f"its rounds' ratios {spread}", c
        return "few"


def more_needed(c: Comparison, threshold: float, alpha: float = DEFAULT_ALPHA) -> int | None:
    """About how many pairs (or rounds a side) in all would decide ``c``: narrow its interval
    inside the threshold around its ratio (unchanged), or, where its ratio is past the threshold,
    clear of 1 at the decision's own level (``alpha``, over the cases tested with it: wider than
    the 95 % interval shown); None where its interval is unbounded. An estimate from the spread
    seen so far, not a promise."""
    if not _bounded(c):
        return None
    center, limit = abs(math.log(c.ratio)), math.log1p(threshold)
    if center < limit:
        return count_for_width(c, limit - center)
    from scipy.stats import norm  # here: importing scipy.stats takes 1.5 s

    wider = norm.ppf(1 - alpha / max(c.tested, 1)) / norm.ppf(0.5 + c.confidence / 2)
    return count_for_width(c, center / max(wider, 1.0))


def count_for_width(c: Comparison, width: float) -> int:
    """About how many pairs (or rounds a side) in all would narrow ``c``'s interval to +-``width``
    (of the log ratio): it narrows as one over the square root of the count, and for pairs as the
    t quantile of their count too (a 3-pair interval is 4.3 spreads wide, a 10-pair one 2.3)."""
    n = min(c.n_baseline, c.n_current)
    half = (math.log(c.ratio_high) - math.log(c.ratio_low)) / 2
    if half <= width:
        return n
    if not c.paired:
        return max(n + 1, math.ceil(n * (half / width) ** 2))
    from scipy.stats import t as student  # here: importing scipy.stats takes 1.5 s

    def quantile(pairs: int) -> float:
        return float(student.ppf(0.5 + c.confidence / 2, pairs - 1))

    spread = half * math.sqrt(n) / quantile(n)  # of one pair's log ratio
    for pairs in range(n + 1, 100 * n + 1):
        if quantile(pairs) * spread / math.sqrt(pairs) <= width:
            return pairs
    return 100 * n + 1


def within_reach(c: Comparison, threshold: float | None, more: int) -> bool:
    """Whether ``more`` pairs can narrow ``c``'s interval to the threshold either side. Its
    spread decides, not where its ratio lies: a case near its threshold needs the pairs most."""
    if threshold is None or not _bounded(c):
        return True
    return count_for_width(c, math.log1p(threshold)) <= c.n_baseline + more


def _bounded(c: Comparison) -> bool:
    return math.isfinite(c.ratio_high) and c.ratio_low > 0 and c.ratio > 0


def more_evidence(
    c: Comparison, threshold: float | None = None, alpha: float = DEFAULT_ALPHA
) -> str:
    """What more would decide ``c``: about how many pairs (or rounds) in all."""
    unit = "block pairs" if c.paired else "rounds a side"
    needed = more_needed(c, threshold, alpha) if threshold is not None else None
    if needed is None or needed <= min(c.n_baseline, c.n_current):
        return f"more {unit} would show whether that is significant"
    n = min(c.n_baseline, c.n_current)
    if needed > 100 * max(n, 1):
        return (
            f"its spread is too wide for the threshold: more {unit} would hardly settle it "
            "(give the test a threshold marker, or measure where it is quieter)"
        )
    return f"about {needed} {unit} in all would decide it"


class TimeImprovement(_TimeRule):
    """Mirror of ``TimeRegression``: ratio < 1 - threshold, one-sided "faster" p < ``alpha``,
    interval below 1; without a possible test (rounds, never pairs), every current round faster
    than every baseline round by more than the threshold."""

    def fails(self, comparison: Comparison) -> str | None:
        c = comparison
        if not self.testable(c):
            if not _decidable_without_test(c) or c.round_ratio_high >= 1.0 - self.threshold:
                return None
            return f"faster by {-c.change_percent:.1f}%, {self.untested(c)}: {c.describe()}"
        if c.ratio >= 1.0 - self.threshold or c.p_value_faster >= self.alpha or c.ratio_high >= 1:
            return None
        return f"faster by {-c.change_percent:.1f}% (p={c.p_value_faster:.2g}): {c.describe()}"
