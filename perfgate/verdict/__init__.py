"""The verdict: rules, pairing of a run with its baseline, the judgement, and its summary."""

from perfgate.benchmark import Ratio
from perfgate.verdict.judge import GateResult, Verdict, judge
from perfgate.verdict.rules import Thresholds, parse_thresholds

__all__ = ["GateResult", "Ratio", "Thresholds", "Verdict", "judge", "parse_thresholds"]
