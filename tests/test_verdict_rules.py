"""The rules (perfgate.verdict.rules), the time statistics they decide by (time_change) and the
thresholds: statistics on seeded synthetic rounds, each condition alone on hand-made
comparisons, and the threshold settings."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from helpers import lognormal_rounds, rounds

from perfgate.benchmark import Benchmark
from perfgate.stats import Comparison, compare_samples
from perfgate.verdict.rules import Case, PeakMemory, RatioChange, RatioLoss
from perfgate.verdict.thresholds import (
    DEFAULT_TIME_THRESHOLD,
    Thresholds,
    parse_fraction,
    parse_thresholds,
    threshold_for,
)
from perfgate.verdict.time_change import TimeImprovement, TimeRegression


def count_flagged(cv: float, n: int, slowdown: float, trials: int) -> int:
    """How many of ``trials`` seeded baseline/current draws TimeRegression() flags."""
    rule = TimeRegression()
    flagged = 0
    for trial in range(trials):
        rng = np.random.default_rng(trial)
        baseline = lognormal_rounds(rng, n, cv)
        current = lognormal_rounds(rng, n, cv) * slowdown
        flagged += rule.fails(compare_samples(baseline, current)) is not None
    return flagged


# Statistical behaviour of the default rule (10 % threshold, alpha 0.01), seeded trials.


@pytest.mark.parametrize("cv, n", [(0.05, 50), (0.10, 30), (0.15, 20)])
def test_identical_distributions_are_rarely_flagged(cv, n):
    assert count_flagged(cv, n, slowdown=1.0, trials=500) <= 5  # < 1 %


def test_fifteen_percent_slowdown_is_detected():
    # With 5 % noise; at 15 % noise and 20 rounds the median itself wanders past the 10 %
    # threshold too often for any rule on the ratio of medians to reach 95 % (see report).
    assert count_flagged(0.05, 30, slowdown=1.15, trials=500) >= 475  # >= 95 %


def test_doubling_is_always_detected_even_with_noise():
    assert count_flagged(0.15, 20, slowdown=2.0, trials=200) == 200


def test_five_percent_slowdown_with_ten_percent_threshold_is_never_flagged():
    assert count_flagged(0.05, 50, slowdown=1.05, trials=500) == 0
    # Even when the slowdown is certain: every round exactly 5 % slower, 2 % noise.
    baseline = np.array(rounds(seed=1, n=50, cv=0.02))
    comparison = compare_samples(baseline, baseline * 1.05)
    assert comparison.p_value < 1e-6 and comparison.ratio_low > 1.0
    assert TimeRegression(threshold=0.10).fails(comparison) is None


# The rules, on hand-made comparisons so each condition is tested alone.


def comparison(ratio: float, p: float = 1e-6, low: float = 0.0, high: float = math.inf):
    return Comparison(
        baseline_median=1e-3,
        current_median=1e-3 * ratio,
        ratio=ratio,
        change_percent=(ratio - 1.0) * 100.0,
        p_value=p,
        p_value_faster=p,
        ratio_low=low,
        ratio_high=high,
        n_baseline=30,
        n_current=30,
    )


def test_time_regression_needs_size_and_both_significance_tests():
    rule = TimeRegression(threshold=0.10, alpha=0.01)
    message = rule.fails(comparison(1.2, p=1e-4, low=1.1))
    assert message is not None
    for fact in ("slower by 20.0%", "threshold 10%", "p=0.0001", "1.20 ms", "1.00 ms", "+20.0 %"):
        assert fact in message, (fact, message)
    assert rule.fails(comparison(1.09, p=1e-4, low=1.05)) is None  # within the threshold
    assert rule.fails(comparison(1.2, p=0.02, low=1.1)) is None  # Mann-Whitney not significant
    assert rule.fails(comparison(1.2, p=1e-4, low=0.99)) is None  # interval reaches 1


def test_time_improvement_mirrors_regression():
    rule = TimeImprovement(threshold=0.10, alpha=0.01)
    assert "faster by 20.0%" in rule.fails(comparison(0.8, p=1e-4, high=0.9))
    assert rule.fails(comparison(0.95, p=1e-4, high=0.97)) is None
    assert rule.fails(comparison(0.8, p=0.05, high=0.9)) is None
    assert rule.fails(comparison(0.8, p=1e-4, high=1.01)) is None


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: TimeRegression(threshold=float("nan")), "threshold"),
        (lambda: TimeRegression(threshold=-0.1), "threshold"),
        (lambda: TimeRegression(alpha=-0.01), "alpha"),
        (lambda: Thresholds(memory_tolerance=float("nan")), "tolerance"),
        (lambda: RatioLoss().check(replace(ratio_case(2.0, 1.9), marker=1.0)), "ratio threshold"),
        (lambda: Thresholds(by_name={"sdpa": -5}), "threshold of 'sdpa'"),
        (lambda: Thresholds(default=True), "default"),
        (lambda: Thresholds(ratio=1.0), "ratio"),
    ],
)
def test_rules_reject_bad_settings(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def peak(before, now, tolerance: float = 0.01) -> str | None:
    """The PeakMemory rule's message on peaks ``before`` and ``now`` (bytes), or None."""
    sides = [Benchmark("m", "m", extra_info={"peak_bytes": bytes_}) for bytes_ in (before, now)]
    found = PeakMemory().check(Case("m", *sides, thresholds=Thresholds(memory_tolerance=tolerance)))
    assert all(f.worse and f.confirmed and f.part == "memory" for f in found)
    return found[0].message if found else None


def test_memory_regression_tolerance():
    assert peak(1_000_000, 1_010_000) is None  # exactly 1 %
    assert "+1.1%" in peak(1_000_000, 1_011_000)
    assert peak(1_000_000, 500_000) is None
    assert peak(0, 0) is None
    assert "was 0" in peak(0, 4096)
    assert peak(1_000_000, 1_000_001, tolerance=0.0) is not None
    assert peak(100, None) is None  # a side without a peak: nothing to compare
    for bad in (-1, True):
        with pytest.raises(ValueError, match="current peak"):
            peak(100, bad)


def ratio_case(baseline, current, higher_is_better=True, again=None, name="speedup") -> Case:
    changes = (RatioChange(name, baseline, current, again, higher_is_better),)
    return Case("r", *[Benchmark("r", "r")] * 2, ratios=changes)


def ratio(baseline, current, higher_is_better=True, again=None) -> list:
    """The RatioLoss rule's findings on one ratio, at the default 10 % threshold."""
    return RatioLoss().check(ratio_case(baseline, current, higher_is_better, again))


def test_ratio_regression_higher_and_lower_is_better():
    assert "speedup" in ratio(2.0, 1.6)[0].message
    assert ratio(2.0, 1.85) == [] and ratio(2.0, 3.0) == []
    assert ratio(0.80, 0.70) and ratio(0.80, 0.75) == []  # a fraction of roofline
    assert "lower is better" in ratio(0.50, 0.60, higher_is_better=False)[0].message
    assert ratio(0.50, 0.54, False) == [] and ratio(0.50, 0.40, False) == []
    for bad in (0.0, float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="speedup current"):
            ratio(2.0, bad)


def test_a_ratio_loss_is_confirmed_only_when_the_rerun_loses_it_too():
    assert [f.confirmed for f in ratio(2.0, 1.6)] == [False]  # not re-run
    assert [f.confirmed for f in ratio(2.0, 1.6, again=1.95)] == [False]  # the re-run recovered
    assert [f.confirmed for f in ratio(2.0, 1.6, again=1.5)] == [True]


# Thresholds: precedence, parsing, names.


def test_threshold_precedence_marker_then_test_then_family_then_default():
    thresholds = Thresholds(default=0.10, by_name={"compile": 0.20, "sdpa": 0.0, "test_b": 0.3})
    assert threshold_for("t", "compile", 0.30, thresholds) == 0.30
    assert threshold_for("t", "compile", 0.0, thresholds) == 0.0  # a zero marker still wins
    assert threshold_for("t", "compile", None, thresholds) == 0.20
    assert threshold_for("t", "sdpa", None, thresholds) == 0.0  # a zero family value too
    assert threshold_for("test_b", "compile", None, thresholds) == 0.3  # the test before family
    assert threshold_for("Test_B", "SDPA", None, thresholds) == 0.3  # any case
    assert threshold_for("t", "mxint8", None, thresholds) == 0.10
    assert threshold_for("t", None, None, thresholds) == 0.10
    assert threshold_for("t", "compile", 1.5, thresholds) == 1.5  # 150 %: past 100 % is valid
    with pytest.raises(ValueError, match="threshold marker of test_attention"):
        threshold_for("test_attention", "sdpa", -0.1, thresholds)


def test_parse_thresholds_default_names_any_case_and_percent():
    thresholds = parse_thresholds(["0.15", "SDPA=0.2", "Compile = 5%"], alpha=0.05)
    assert thresholds.default == 0.15 and thresholds.alpha == 0.05
    assert dict(thresholds.by_name) == {"sdpa": 0.2, "compile": 0.05}
    assert threshold_for("test_attention", "sdpa", None, thresholds) == 0.2
    assert parse_thresholds([]) == Thresholds()
    assert parse_thresholds([]).default is None  # none given: each case's own, verdict.noise
    assert threshold_for("t", None, None, parse_thresholds([])) == DEFAULT_TIME_THRESHOLD


@pytest.mark.parametrize(
    "spec, message",
    [
        ("sdpa=fast", "expected a fraction or a percentage"),
        ("", "expected a fraction or a percentage"),
        ("sdpa=20", "threshold '20' is ambiguous: write 20% or 0.2"),  # percent without the %
        ("1.5", "threshold '1.5' is ambiguous: write 1.5% or 0.015"),
        ("sdpa=-0.1", "a percentage of 0 or more"),
        ("nan", "a percentage of 0 or more"),
        ("inf%", "a percentage of 0 or more"),
    ],
)
def test_parse_thresholds_rejects_bad_specs_in_one_line(spec, message):
    with pytest.raises(ValueError, match=message) as error:
        parse_thresholds([spec])
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("text, fraction", [("10%", 0.1), ("0.1", 0.1), (" 2.5 % ", 0.025),
                                            ("1", 1.0), ("0", 0.0), ("150%", 1.5)])  # fmt: skip
def test_a_threshold_is_a_fraction_or_a_percentage(text, fraction):
    assert parse_fraction(text) == pytest.approx(fraction)
    assert parse_thresholds([f"sdpa={text}"]).by_name["sdpa"] == pytest.approx(fraction)


def test_unknown_names_are_those_matching_no_family_or_test_in_any_case():
    thresholds = parse_thresholds(["sdpaa=0.5", "SDPA=0.2", "test_attention=0.3", "0.2"])
    known = ["sdpa", "Test_Attention", "compile"]
    assert thresholds.unknown_names(known) == ["sdpaa"]
    assert parse_thresholds(["Compile=0.3"]).unknown_names(known) == []
    assert parse_thresholds(["0.3"]).unknown_names([]) == []  # a default names nothing
