"""``judge`` and the pairing behind it, on synthetic runs built with ``run_from_json``: what is
gated and how, what is not gated and why, declared same-run ratios, and baseline sets."""

from __future__ import annotations

import pytest
from helpers import (
    FLASH,
    attention_run,
    entry,
    rounds,
    rounds_at,
    run_of,
    single,
)

from perfgate.benchmark import RunFormatError
from perfgate.format import fmt_percent, fmt_time
from perfgate.stats import MIN_ROUNDS
from perfgate.verdict import Thresholds, Verdict, judge
from perfgate.verdict.judge import HOST_BOUND, failed
from perfgate.verdict.reason import Reason


def one(baseline, current, thresholds=None, confirmation=None):
    (result,) = judge([baseline], current, thresholds, confirmation)
    return result


# --- time, memory and confirmation -------------------------------------------------------------
def test_confirmation_decides_between_regression_and_unconfirmed():
    baseline, slower = single("t", rounds(1)), single("t", rounds(2, 1.5))
    cases = {
        "confirmed": (single("t", rounds(3, 1.5)), Verdict.REGRESSION),
        "not reproduced": (single("t", rounds(3)), Verdict.UNCONFIRMED),
        "not re-run": (None, Verdict.UNCONFIRMED),
    }
    for case, (confirmation, verdict) in cases.items():
        result = one(baseline, slower, confirmation=confirmation)
        assert result.verdict is verdict, case
        assert failed([result]) == (verdict is Verdict.REGRESSION)
    # A slower confirmation run cannot turn a clean first pass into a regression.
    quiet = one(baseline, single("t", rounds(2)), confirmation=single("t", rounds(3, 1.5)))
    assert quiet.verdict is Verdict.UNCHANGED


def test_five_percent_slowdown_with_ten_percent_threshold_is_unchanged():
    baseline = rounds(seed=1, n=50, cv=0.02)
    slower = [s * 1.05 for s in baseline]
    result = one(single("t", baseline), single("t", slower), confirmation=single("t", slower))
    assert result.verdict is Verdict.UNCHANGED and result.comparison.p_value < 1e-6


def test_regression_message_reports_medians_change_p_value_and_the_rerun():
    result = one(single("t", rounds(1)), single("t", rounds(2, 2.0)), None,
                 single("t", rounds(3, 2.0)))  # fmt: skip
    c = result.comparison
    assert result.verdict is Verdict.REGRESSION and c.ratio > 1.8
    for fact in (fmt_time(c.current_median), fmt_time(c.baseline_median)):
        assert fact in result.message
    change = fmt_percent(c.change_percent / 100, signed=True)
    assert change in result.message and "p=" in result.message
    assert "confirmed by re-run: median" in result.message


def test_thresholds_from_the_command_line_and_the_marker_change_the_verdict():
    thresholds = Thresholds(default=0.10, by_name={"compile": 0.20, "sdpa": 0.05})
    cases = {  # (declared family, marker): verdict for a confirmed 15 % slowdown
        (None, None): Verdict.REGRESSION,
        ("compile", None): Verdict.UNCHANGED,
        ("COMPILE", None): Verdict.UNCHANGED,  # family names in any case
        ("compile", 0.05): Verdict.REGRESSION,
        ("sdpa", 0.30): Verdict.UNCHANGED,
    }
    for (family, marker), verdict in cases.items():
        declared = {k: v for k, v in (("family", family), ("threshold", marker)) if v is not None}
        runs = [single("t", rounds(seed, factor), declared=declared)
                for seed, factor in ((1, 1.0), (2, 1.15), (3, 1.15))]  # fmt: skip
        result = one(runs[0], runs[1], thresholds, runs[2])
        assert result.verdict is verdict, (family, marker, result.message)
        expected = thresholds.by_name.get((family or "").lower(), 0.10)
        assert result.threshold == (marker if marker is not None else expected)


def test_peak_memory_growth_is_a_regression_without_a_rerun():
    name = "test_encoder[cuda-bert-basex8x128-mxint8]"
    before = single(name, rounds_at(17e-3, 0), extra={"peak_bytes": 235_744_768})
    after = single(name, rounds_at(17e-3, 1), extra={"peak_bytes": 300_000_000})
    result = one(before, after)
    assert result.verdict is Verdict.REGRESSION and "peak memory 300,000,000 B" in result.message
    same = single(name, rounds_at(17e-3, 1), extra={"peak_bytes": 235_744_768})
    assert one(before, same).verdict is Verdict.UNCHANGED


# --- not gated, with the reason; new and not run -------------------------------------------------
def test_an_untrusted_gpu_is_never_gated_but_still_measured():
    doubled = [single("t", rounds(1)), single("t", rounds(2, 2.0), untrusted=["GPU throttled"])]
    result = one(*doubled)
    assert result.verdict is Verdict.NOT_GATED and not result.verdict.gated
    assert result.message == "not gated: current run: GPU throttled"
    assert result.comparison.ratio > 1.8  # still measured, for the report
    baseline = single("t", rounds(1), untrusted=["2 other processes"])
    assert "baseline: 2 other processes" in one(baseline, single("t", rounds(2))).message
    assert not failed(judge([doubled[0]], doubled[1]))


def test_host_bound_cases_are_reported_not_gated():
    name = "test_resnet18_steady[cuda-1-compiled]"
    before = single(name, rounds_at(1.46e-3, 0), extra={"host_bound": True})
    after = single(name, rounds_at(2.9e-3, 1), extra={"host_bound": True})
    result = one(before, after)
    assert (result.verdict, result.message) == (Verdict.NOT_GATED, f"not gated: {HOST_BOUND}")
    assert result.comparison.ratio == pytest.approx(2.9 / 1.46)


def test_a_case_whose_run_time_choice_ran_other_code_is_not_gated():
    name = "test_linear[cuda-14336x4096-1-mxint8_fused-bf16]"
    before = single(name, rounds_at(29.7e-6, 0), extra={"code_path": "fused config A"})
    after = single(name, rounds_at(33.9e-6, 1), extra={"code_path": "fused config B"})
    result = one(before, after)
    assert result.verdict is Verdict.NOT_GATED
    assert "baseline fused config A, now fused config B" in result.message
    same = single(name, rounds_at(33.9e-6, 1), extra={"code_path": "fused config A"})
    assert one(before, same).verdict is not Verdict.NOT_GATED  # same code: gated as usual
    unknown = single(name, rounds_at(33.9e-6, 1))  # a baseline saved before code_path existed
    assert one(unknown, after).verdict is not Verdict.NOT_GATED


def test_too_few_rounds_are_undecided_whatever_the_change():
    few = MIN_ROUNDS - 1
    result = one(single("t", rounds(1, n=few)), single("t", rounds(2, 3.0, n=30)))
    assert result.verdict is Verdict.UNDECIDED
    expected = f"undecided: too few rounds to decide ({few} baseline and 30 current rounds, "
    assert result.message == expected + f"needs {MIN_ROUNDS} a side)"
    result = one(single("t", rounds(1)), single("t", rounds(2, 3.0, n=few)))
    expected = f"undecided: too few rounds to decide (30 baseline and {few} current rounds, "
    assert result.message == expected + f"needs {MIN_ROUNDS} a side)"


def test_a_baseline_without_per_round_data_is_not_gated_even_when_much_faster():
    # the case: a baseline 3.3x faster than the current run read "unchanged"
    baseline = single("t", None, median=1e-3 / 3.3)
    result = one(baseline, single("t", rounds(2)))
    assert result.verdict is Verdict.NOT_GATED and result.reason is Reason.NO_DATA
    assert "the baseline has no per-round data" in result.message
    # the stored medians are shown, never judged: nothing there can be significant
    c = result.comparison
    assert c.change_percent == pytest.approx(230.0, rel=0.05) and not c.enough_rounds


def test_new_and_not_run_benchmarks_are_named_as_such():
    baseline = run_of(entry("x::old", rounds(1)), entry("x::both", rounds(2)))
    current = run_of(entry("x::both", rounds(3)), entry("x::new", rounds(4)))
    results = {r.name: r for r in judge([baseline], current)}
    assert (results["x::new"].verdict, results["x::new"].message) == (
        Verdict.NEW, "new benchmark: not in the baseline")  # fmt: skip
    assert (results["x::old"].verdict, results["x::old"].message) == (
        Verdict.NOT_RUN, "in the baseline, not run this time")  # fmt: skip
    assert results["x::both"].verdict is Verdict.UNCHANGED
    assert not any(r.verdict.gated for r in results.values() if r.name != "x::both")


def test_unusable_rounds_are_rejected_naming_the_run_and_the_benchmark():
    for bad in ([1e-3, 0.0], [1e-3, -1.0], [1e-3, "x"], "1e-3"):
        with pytest.raises(RunFormatError, match=r"benchmarks\[0\] \(x::test_sdpa\)"):
            run_of(entry("x::test_sdpa", [1e-3], median=1e-3) | {"stats": {"data": bad}})


# --- improvements and severity -----------------------------------------------------------------
def test_an_improvements_message_gives_the_numbers_of_its_comparison():
    quick, slow = attention_run(20e-6, 8e-6, 0), attention_run(20e-6, 10e-6, 2)
    current = attention_run(20e-6, 7e-6, 4)
    flash = next(r for r in judge([quick, slow], current) if r.name == FLASH)
    c = flash.comparison
    assert flash.verdict is Verdict.IMPROVEMENT
    assert c.baseline_median == pytest.approx(8e-6)  # the set's fastest run, not its slowest
    assert f"faster by {-c.change_percent:.1f}%" in flash.message
    assert fmt_time(c.baseline_median) in flash.message
    assert flash.message.endswith("(against the baseline set's fastest run)")


def test_results_are_sorted_by_severity():
    def pair(name, factor, confirm=None, **fields):
        return (entry(f"x::{name}", rounds(1), **fields),
                entry(f"x::{name}", rounds(2, factor), **fields),
                entry(f"x::{name}", rounds(3, confirm or 1.0), **fields))  # fmt: skip

    rows = [pair("same", 1.0), pair("faster", 0.7), pair("noisy", 1.5, extra={"host_bound": 1}),
            pair("flaky", 1.5), pair("worse", 1.5, 1.5), pair("worst", 3.0, 3.0)]  # fmt: skip
    baseline = run_of(*(r[0] for r in rows), entry("x::gone", rounds(1)))
    current = run_of(*(r[1] for r in rows), entry("x::new", rounds(2)))
    results = judge([baseline], current, None, run_of(*(r[2] for r in rows)))
    assert [(r.name, str(r.verdict)) for r in results] == [
        ("x::worst", "regression"),
        ("x::worse", "regression"),
        ("x::flaky", "unconfirmed"),
        ("x::noisy", "not gated"),
        ("x::new", "new"),
        ("x::gone", "not run"),
        ("x::faster", "improvement"),
        ("x::same", "unchanged"),
    ]
    assert failed(results) and not failed(results[2:])


def test_two_single_process_runs_on_two_gpus_say_so_and_a_run_without_an_index_shows_its_uuid():
    """A run records the GPU it timed on (machine_info.perfgate.gpu); the judge notes a
    comparison across two physical GPUs of one model."""
    from helpers import entry, rounds, run_json

    from perfgate.benchmark import run_from_json

    def on(gpu: dict, seed: int):
        data = run_json(entry("t.py::test_k", rounds(seed)))
        data["machine_info"]["perfgate"]["gpu"] = gpu
        return run_from_json(data, None)

    first = on({"index": 0, "physical_index": 0, "uuid": "GPU-aaaa"}, 0)
    second = on({"index": 0, "physical_index": 1, "uuid": "GPU-bbbb"}, 1)
    (result,) = judge([first], second)
    note = "compared across two GPUs of one model: baseline on GPU 0 (GPU-aaaa), now on GPU 1"
    assert any(line.startswith(note) for line in result.details), result.details
    (same,) = judge([first], on({"index": 0, "physical_index": 0, "uuid": "GPU-aaaa"}, 2))
    assert not any("two GPUs" in line for line in same.details)
    (bare,) = judge([first], on({"uuid": "GPU-cccc"}, 3))  # no NVML index recorded
    assert any(line.endswith("now on GPU-cccc") for line in bare.details), bare.details
