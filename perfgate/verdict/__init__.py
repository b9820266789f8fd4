"""The verdict: rules (one interface, ``rules.RULES``), thresholds, pairing of a run with its
baseline, the judgement, paired A/B blocks, attribution, steps, and the summary."""

from perfgate.fields import Ratio
from perfgate.verdict.judge import GateResult, Verdict, judge
from perfgate.verdict.thresholds import Thresholds, parse_thresholds

__all__ = ["GateResult", "Ratio", "Thresholds", "Verdict", "judge", "parse_thresholds"]
