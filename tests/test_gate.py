"""Tests for perfgate.gate: rules, thresholds, verdicts, ordering and exit status.

Durations are synthetic per-round seconds with lognormal noise from seeded numpy generators.
"""

import math

import numpy as np
import pytest

from perfgate.gate import (
    BenchmarkPair,
    MemoryRegression,
    RatioPair,
    RatioRegression,
    Thresholds,
    TimeImprovement,
    TimeRegression,
    Verdict,
    exit_status,
    gate_results,
    threshold_for,
)
from perfgate.stats import Comparison, compare_samples


def lognormal_rounds(rng: np.random.Generator, n: int, cv: float, median_s: float = 1e-3):
    """``n`` per-round durations (seconds) with lognormal noise of coefficient of variation cv."""
    return median_s * rng.lognormal(0.0, math.sqrt(math.log1p(cv**2)), n)


def rounds(seed: int, slowdown: float = 1.0, n: int = 30, cv: float = 0.05) -> np.ndarray:
    return lognormal_rounds(np.random.default_rng(seed), n, cv) * slowdown


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


# Statistical behaviour of the default rule (10 % threshold, alpha 0.01), 500 seeded trials.


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
    baseline = rounds(seed=1, n=50, cv=0.02)
    comparison = compare_samples(baseline, baseline * 1.05)
    assert comparison.p_value < 1e-6 and comparison.ratio_low > 1.0
    assert TimeRegression(threshold=0.10).fails(comparison) is None
    pair = BenchmarkPair("t", baseline, baseline * 1.05, confirmation=baseline * 1.05)
    assert gate_results([pair])[0].verdict is Verdict.UNCHANGED


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
    for fact in ("slower by 20.0%", "p=0.0001", "1.2 ms", "1 ms", "+20.0%"):
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
        (lambda: TimeRegression(threshold=10), "threshold"),  # percent given for a fraction
        (lambda: TimeRegression(alpha=-0.01), "alpha"),
        (lambda: MemoryRegression(tolerance=float("nan")), "tolerance"),
        (lambda: RatioRegression(threshold=1.0), "threshold"),
        (lambda: Thresholds(families={"sdpa": 5}), "families\\['sdpa'\\]"),
    ],
)
def test_rules_reject_bad_settings(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_memory_regression_tolerance():
    rule = MemoryRegression(tolerance=0.01)
    assert rule.fails(1_000_000, 1_010_000) is None  # exactly 1 %
    assert "+1.1%" in rule.fails(1_000_000, 1_011_000)
    assert rule.fails(1_000_000, 500_000) is None
    assert rule.fails(0, 0) is None
    assert "was 0" in rule.fails(0, 4096)
    assert MemoryRegression(tolerance=0.0).fails(1_000_000, 1_000_001) is not None
    assert rule.fails(np.int64(100), np.int64(200)) is not None
    for bad in (-1, 1.5, None):
        with pytest.raises(ValueError, match="current_bytes"):
            rule.fails(100, bad)


def test_ratio_regression_higher_and_lower_is_better():
    speedup = RatioRegression(threshold=0.10)
    assert "speedup" in speedup.fails(2.0, 1.6, name="speedup")
    assert speedup.fails(2.0, 1.85) is None and speedup.fails(2.0, 3.0) is None
    roofline = RatioRegression(threshold=0.10)
    assert roofline.fails(0.80, 0.70) is not None and roofline.fails(0.80, 0.75) is None
    latency = RatioRegression(threshold=0.10, higher_is_better=False)  # MXINT8 / FP32 latency
    assert "lower is better" in latency.fails(0.50, 0.60)
    assert latency.fails(0.50, 0.54) is None and latency.fails(0.50, 0.40) is None
    for bad in (0.0, float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="speedup current"):
            speedup.fails(2.0, bad, name="speedup")


def test_ratio_collapse_is_a_regression_though_absolute_times_moved_together():
    # A faster machine: eager 20 % faster, compiled 5 % faster. Neither time regressed, yet
    # the compiled/eager speedup fell from 2.0 to 1.68.
    eager_base, eager_now = 10e-3, 8e-3
    compiled_base, compiled_now = 5e-3, 4.75e-3
    compiled_pair = BenchmarkPair(
        "test_compile_resnet",
        baseline=rounds(1, n=30) * compiled_base / 1e-3,
        current=rounds(2, n=30) * compiled_now / 1e-3,
        family="compile",
        ratios=[
            RatioPair(
                "compiled/eager speedup",
                baseline=eager_base / compiled_base,
                current=eager_now / compiled_now,
                confirmation=eager_now / compiled_now * 1.01,
            )
        ],
    )
    [result] = gate_results([compiled_pair])
    assert result.comparison.ratio < 1.0  # the absolute time improved
    assert result.verdict is Verdict.REGRESSION, result.message
    assert "compiled/eager speedup 1.684 vs baseline 2" in result.message
    unconfirmed = BenchmarkPair(
        "t", rounds(1), rounds(2), ratios=[RatioPair("fused/naive speedup", 3.0, 2.0)]
    )
    assert gate_results([unconfirmed])[0].verdict is Verdict.UNCONFIRMED


def test_threshold_precedence_marker_then_family_then_default():
    thresholds = Thresholds(default=0.10, families={"compile": 0.20, "sdpa": 0.0})
    assert threshold_for("t", "compile", 0.30, thresholds) == 0.30
    assert threshold_for("t", "compile", 0.0, thresholds) == 0.0  # a zero marker still wins
    assert threshold_for("t", "compile", None, thresholds) == 0.20
    assert threshold_for("t", "sdpa", None, thresholds) == 0.0  # a zero family value too
    assert threshold_for("t", "mxint8", None, thresholds) == 0.10
    assert threshold_for("t", None, None, thresholds) == 0.10
    with pytest.raises(ValueError, match="threshold marker of test_attention"):
        threshold_for("test_attention", "sdpa", 15, thresholds)


def test_thresholds_change_the_verdict():
    thresholds = Thresholds(default=0.10, families={"compile": 0.20, "sdpa": 0.05})
    slower = {"baseline": rounds(1), "current": rounds(2, 1.15), "confirmation": rounds(3, 1.15)}
    cases = {  # (family, marker): verdict for a 15 % slowdown
        (None, None): Verdict.REGRESSION,
        ("compile", None): Verdict.UNCHANGED,
        ("compile", 0.05): Verdict.REGRESSION,
        ("sdpa", 0.30): Verdict.UNCHANGED,
    }
    for (family, marker), verdict in cases.items():
        pair = BenchmarkPair("t", family=family, threshold=marker, **slower)
        [result] = gate_results([pair], thresholds)
        assert result.verdict is verdict, (family, marker, result.message)


# gate_results verdicts, ordering and exit status.


def test_confirmation_decides_between_regression_and_unconfirmed():
    baseline, slower = rounds(1), rounds(2, 1.5)
    verdicts = {
        "confirmed": (rounds(3, 1.5), Verdict.REGRESSION),
        "not reproduced": (rounds(3), Verdict.UNCONFIRMED),
        "not re-run": (None, Verdict.UNCONFIRMED),
    }
    for case, (confirmation, verdict) in verdicts.items():
        [result] = gate_results([BenchmarkPair(case, baseline, slower, confirmation=confirmation)])
        assert result.verdict is verdict, case
        assert exit_status([result]) == (verdict is Verdict.REGRESSION)
    # A slower confirmation run cannot turn a clean first pass into a regression.
    quiet = BenchmarkPair("quiet", baseline, rounds(2), confirmation=rounds(3, 1.5))
    assert gate_results([quiet])[0].verdict is Verdict.UNCHANGED


def test_regression_message_reports_medians_change_and_p_value():
    [result] = gate_results([BenchmarkPair("t", rounds(1), rounds(2, 2.0), None, rounds(3, 2.0))])
    c = result.comparison
    assert result.confirmation is not None and result.confirmation.ratio > 1.8
    for fact in (f"{c.current_median * 1e3:.4g} ms", f"{c.baseline_median * 1e3:.4g} ms"):
        assert fact in result.message
    assert f"{c.change_percent:+.1f}%" in result.message and "p=" in result.message


def test_memory_regression_needs_no_rerun():
    pair = BenchmarkPair("t", rounds(1), rounds(2), peak_bytes=(1 << 30, (1 << 30) + (1 << 25)))
    [result] = gate_results([pair])
    assert result.verdict is Verdict.REGRESSION and "peak memory" in result.message


def test_untrusted_is_never_gated():
    doubled = {"baseline": rounds(1), "current": rounds(2, 2.0), "confirmation": rounds(3, 2.0)}
    pair = BenchmarkPair("t", peak_bytes=(100, 200), untrusted="GPU throttled", **doubled)
    [result] = gate_results([pair])
    assert result.verdict is Verdict.UNTRUSTED and "GPU throttled" in result.message
    assert result.comparison.ratio > 1.8  # still measured, for the report
    results = gate_results(
        [BenchmarkPair("a", **doubled), BenchmarkPair("gone", rounds(1), None)],
        untrusted="shared GPU: 2 other processes",
    )
    assert [r.verdict for r in results] == [Verdict.UNTRUSTED, Verdict.MISSING]
    assert exit_status(results) == 0


def test_missing_benchmarks_are_listed():
    results = gate_results(
        [BenchmarkPair("new", None, rounds(1)), BenchmarkPair("old", rounds(1), None)]
    )
    assert {r.name: r.verdict for r in results} == {"new": Verdict.MISSING, "old": Verdict.MISSING}
    assert {r.name: r.message for r in results} == {
        "new": "only in the current run (no baseline)",
        "old": "only in the baseline (not run)",
    }
    with pytest.raises(ValueError, match="both None"):
        gate_results([BenchmarkPair("nothing", None, None)])


def test_bad_samples_are_rejected_naming_benchmark_and_side():
    for side in ("baseline", "current", "confirmation"):
        samples = {"baseline": rounds(1), "current": rounds(2), side: [1e-3, float("nan")]}
        with pytest.raises(ValueError, match=f"test_sdpa {side}"):
            gate_results([BenchmarkPair("test_sdpa", **samples)])


def test_tiny_samples_never_gate():
    pair = BenchmarkPair("t", rounds(1, n=2), rounds(2, 3.0, n=2), confirmation=rounds(3, 3.0, n=2))
    assert gate_results([pair])[0].verdict is Verdict.UNCHANGED


def test_results_are_sorted_by_severity_and_exit_status():
    pairs = [
        BenchmarkPair("same", rounds(1), rounds(2)),
        BenchmarkPair("faster", rounds(1), rounds(2, 0.7)),
        BenchmarkPair("new", None, rounds(2)),
        BenchmarkPair("noisy", rounds(1), rounds(2, 1.5), untrusted="clocks dropped"),
        BenchmarkPair("flaky", rounds(1), rounds(2, 1.5), confirmation=rounds(3)),
        BenchmarkPair("worse", rounds(1), rounds(2, 1.5), confirmation=rounds(3, 1.5)),
        BenchmarkPair("worst", rounds(1), rounds(2, 3.0), confirmation=rounds(3, 3.0)),
    ]
    results = gate_results(pairs)
    assert [(r.name, str(r.verdict)) for r in results] == [
        ("worst", "regression"),
        ("worse", "regression"),
        ("flaky", "unconfirmed"),
        ("noisy", "untrusted"),
        ("new", "missing"),
        ("faster", "improvement"),
        ("same", "unchanged"),
    ]
    assert exit_status(results) == 1
    assert exit_status(results[2:]) == 0
    assert exit_status([]) == 0
