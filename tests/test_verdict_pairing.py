"""Same-run ratios declared with ``perfgate.Ratio`` and saved with each benchmark, and baseline
sets (each benchmark against its slowest run, each ratio against its worst, an improvement
against the fastest), through ``judge`` and the pairing functions behind it."""

from __future__ import annotations

import pytest
from helpers import (
    COMPILE,
    COPY_FRACTION,
    DENSE_LATENCY,
    FLASH,
    NAIVE,
    SDPA,
    attention,
    attention_run,
    entry,
    rounds_at,
    run_of,
    single,
    verdicts,
)

from perfgate.verdict import Ratio, Verdict, judge
from perfgate.verdict.judge import rerun_names
from perfgate.verdict.pairing import declarations_of, same_run_ratios, worst_ratios


def test_a_ratio_declares_a_reference_case_or_a_stored_field():
    with pytest.raises(ValueError, match="give either key and reference, or field"):
        Ratio("nothing")
    with pytest.raises(ValueError, match="give either"):
        Ratio("both", key="implementation", reference="naive", field="fraction_of_copy")
    saved = {"name": "fraction of the copy roofline", "field": "fraction_of_copy"}
    assert COPY_FRACTION.as_json() == {**saved, "higher_is_better": True}


def test_speedup_over_naive_is_attached_to_the_fused_case():
    run = attention_run(26e-6, 10e-6, 0)
    ratios = same_run_ratios(run, declarations_of(run))
    assert set(ratios) == {FLASH}  # the reference case has no ratio to itself
    (ratio,) = ratios[FLASH]
    assert ratio.name == "speedup over naive attention" and ratio.higher_is_better
    assert ratio.value == pytest.approx(2.6, rel=1e-9)
    assert ratio.partner == NAIVE


def test_latency_ratio_pairs_only_cases_that_differ_in_the_key():
    declared = {"ratios": [DENSE_LATENCY.as_json()]}
    base = {"bench_device": "cuda", "weight_shape": [4096, 4096], "dtype_name": "bf16"}

    def linear(case, median_s, batch, implementation):
        params = {**base, "batch": batch, "implementation": implementation}
        return entry(f"x::test_linear[{case}]", rounds_at(median_s, 0), params, declared=declared)

    run = run_of(linear("a", 1.0, 1, "dense"), linear("b", 1.5, 1, "mxint8"),
                 linear("c", 9.0, 16, "mxint8"))  # fmt: skip
    ratios = same_run_ratios(run, declarations_of(run))
    (ratio,) = ratios["x::test_linear[b]"]
    assert (ratio.value, ratio.higher_is_better) == (pytest.approx(1.5), False)
    assert "x::test_linear[c]" not in ratios  # no dense case at batch 16


def test_ratio_collapse_is_a_regression_though_both_times_moved_together():
    baseline = attention_run(26e-6, 10e-6, 0)
    # flash moved 5 % (under the 10 % time threshold) but naive got much faster, so fusion's
    # advantage collapsed: the speedup fell from 2.6x to 1.4x
    current = attention_run(14.7e-6, 10.5e-6, 2)
    first = {r.name: r for r in judge([baseline], current)}
    assert first[FLASH].verdict is Verdict.UNCONFIRMED
    assert "speedup over naive attention 1.4 vs baseline 2.6" in first[FLASH].message
    assert "(not confirmed by a re-run)" in first[FLASH].message
    assert rerun_names(list(first.values()), current, declarations_of(current)) == {FLASH, NAIVE}
    again = attention_run(14.8e-6, 10.4e-6, 4)
    assert verdicts([baseline], current, again)[FLASH] is Verdict.REGRESSION
    recovered = attention_run(26e-6, 10.4e-6, 4)
    assert verdicts([baseline], current, recovered)[FLASH] is Verdict.UNCONFIRMED


def test_compile_speedup_collapse_while_the_compiled_time_improved():
    # A faster machine: eager 20 % faster, compiled 5 % faster; no time regressed, yet the
    # compiled/eager speedup fell from 2.0 to 1.68.
    def run(eager_s, compiled_s, seed):
        return run_of(*(entry(f"x::test_resnet18_steady[cpu-1-{mode}]", rounds_at(s, seed + i),
                              {"mode": mode, "batch": 1}, declared=COMPILE)
                        for i, (mode, s) in enumerate((("eager", eager_s),
                                                       ("compiled", compiled_s)))))  # fmt: skip

    name = "x::test_resnet18_steady[cpu-1-compiled]"
    results = {r.name: r for r in judge([run(10e-3, 5e-3, 0)], run(8e-3, 4.75e-3, 2),
                                        None, run(8e-3, 4.76e-3, 4))}  # fmt: skip
    assert results[name].comparison.ratio < 1.0  # the absolute time improved
    assert results[name].verdict is Verdict.REGRESSION, results[name].message
    assert "speedup of compiled over eager 1.684 vs baseline 2" in results[name].message


def test_fraction_of_copy_is_gated_as_a_ratio_from_the_stored_field():
    name, declared = (
        "test_dequantize[cuda-268435456-triton-32]",
        {"ratios": [COPY_FRACTION.as_json()]},
    )
    before = single(name, rounds_at(277e-6, 0), extra={"fraction_of_copy": 0.99}, declared=declared)
    after = single(name, rounds_at(277e-6, 1), extra={"fraction_of_copy": 0.60}, declared=declared)
    (result,) = judge([before], after)
    assert result.verdict is Verdict.UNCONFIRMED
    assert "fraction of the copy roofline 0.6 vs baseline 0.99" in result.message


def test_runs_saved_before_the_declarations_borrow_the_current_runs():
    old = run_of(attention("naive", 26e-6, 0, declared=False),
                 attention("flash", 10e-6, 1, declared=False))  # fmt: skip
    current = attention_run(14.7e-6, 10.5e-6, 2)
    assert declarations_of(old) == {}
    assert declarations_of(current, old)[FLASH] == SDPA
    assert verdicts([old], current)[FLASH] is Verdict.UNCONFIRMED  # the ratio rule applied
    undeclared = run_of(attention("naive", 14.7e-6, 2, declared=False),
                        attention("flash", 10.5e-6, 3, declared=False))  # fmt: skip
    assert verdicts([old], undeclared)[FLASH] is Verdict.UNCHANGED  # no rule declared anywhere


# --- baseline sets -------------------------------------------------------------------------------
def test_a_baseline_set_compares_each_benchmark_with_its_slowest_run():
    # the machine's sessions differ by 25 %: the current run sits inside that spread
    quick, slow = attention_run(20e-6, 8e-6, 0), attention_run(25e-6, 10e-6, 2)
    current = attention_run(24e-6, 9.8e-6, 4)
    assert Verdict.UNCONFIRMED in verdicts([quick], current).values()
    assert set(verdicts([quick, slow], current).values()) == {Verdict.UNCHANGED}
    assert set(verdicts([slow, quick], current).values()) == {Verdict.UNCHANGED}  # any order
    flash = next(r for r in judge([quick, slow], current) if r.name == FLASH)
    assert flash.comparison.baseline_median == pytest.approx(10e-6)


def test_a_baseline_set_still_flags_what_is_slower_than_all_its_runs():
    quick, slow = attention_run(20e-6, 8e-6, 0), attention_run(25e-6, 10e-6, 2)
    current = attention_run(25e-6, 12.5e-6, 4)
    assert verdicts([quick, slow], current)[FLASH] is Verdict.UNCONFIRMED  # +25 % on the slowest


def test_worst_ratio_of_a_set_is_the_reference():
    good = attention_run(26e-6, 10e-6, 0)  # 2.6x
    poor = attention_run(22e-6, 10e-6, 2)  # 2.2x
    current = attention_run(21e-6, 10e-6, 4)  # 2.1x
    worst = worst_ratios([good, poor], declarations_of(current))
    assert worst[FLASH]["speedup over naive attention"].value == pytest.approx(2.2)
    assert verdicts([good, poor], current)[FLASH] is Verdict.UNCHANGED  # -5 % on the worst
    assert verdicts([good], current)[FLASH] is Verdict.UNCONFIRMED  # -19 % on the best alone


def test_an_improvement_on_a_baseline_set_must_beat_its_fastest_run():
    quick, slow = attention_run(20e-6, 8e-6, 0), attention_run(20e-6, 10e-6, 2)
    current = attention_run(20e-6, 8.5e-6, 4)
    assert verdicts([slow], current)[FLASH] is Verdict.IMPROVEMENT
    assert verdicts([quick, slow], current)[FLASH] is Verdict.UNCHANGED
