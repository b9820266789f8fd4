"""Cases tested together: a session's timed cases, or an A/B's (every lane's), are one family,
and each one's p-values are adjusted for their number (Bonferroni), so that the chance of any
false alarm among them stays at most the significance level however many cases are tested:
sending more cases to an A/B never means more false alarms. The judge applies the adjustment
to a case's first comparisons (``verdict.judge``); a re-run confirms an already flagged case and
is not adjusted."""

from __future__ import annotations

from dataclasses import replace

from perfgate.stats import Comparison
from perfgate.verdict.evidence import Evidence


def tested_together(comparison: Comparison, cases: int) -> Comparison:
    """``comparison`` as one of ``cases`` tested together (a session's or an A/B's cases): its
    p-values multiplied by ``cases`` (Bonferroni), so that the chance of any false alarm among
    them stays at most the significance level, however many cases are tested. The smallest
    p-value the counts can give grows with them; ``p_raw`` keeps the case's own."""
    if cases <= 1:
        return comparison
    return replace(
        comparison,
        p_value=min(1.0, comparison.p_value * cases),
        p_value_faster=min(1.0, comparison.p_value_faster * cases),
        smallest_p=min(1.0, comparison.smallest_p * cases),
        tested=cases,
        p_raw=comparison.p_value,
    )


def together(cases: dict[str, Evidence]) -> dict[str, Evidence]:
    """``cases`` with each timed one marked as tested together with the others."""
    tested = sum(e.timed for e in cases.values())
    return {name: replace(e, tested=tested) if e.timed else e for name, e in cases.items()}
