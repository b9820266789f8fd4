"""Unit tests of the run-level gate: same-run ratios, pairing with a baseline, re-run choice."""

from __future__ import annotations

import numpy as np
import pytest

from perfgate.gate import Thresholds, Verdict
from perfgate.run_gate import (
    GateInputs,
    Measured,
    measured_from_run,
    rerun_names,
    run_gate,
    same_run_ratios,
)

INPUTS = GateInputs(families={}, thresholds=Thresholds())


def rounds(median: float, seed: int, n: int = 30) -> list[float]:
    noise = np.random.default_rng(seed).lognormal(0.0, 0.03, n)
    return list(median * noise / np.median(noise))


def attention(implementation: str, median: float, seed: int) -> Measured:
    name = f"perf_tests/test_sdpa.py::test_attention[cuda-32x8x128x64-{implementation}-fp16]"
    params = {"bench_device": "cuda", "shape": [32, 8, 128, 64], "dtype_name": "fp16"}
    return Measured(name, rounds(median, seed), {**params, "implementation": implementation})


def run_of(*measured: Measured) -> dict[str, Measured]:
    return {m.fullname: m for m in measured}


def test_speedup_over_naive_is_attached_to_the_fused_case():
    run = run_of(attention("naive", 26e-6, 0), attention("flash", 10e-6, 1))
    (ratio,) = same_run_ratios(run)[attention("flash", 1, 0).fullname]
    name, value, higher_is_better, partner = ratio
    assert name == "speedup over naive attention" and higher_is_better
    assert value == pytest.approx(2.6, rel=1e-6)
    assert partner.endswith("naive-fp16]")


def test_latency_ratio_pairs_only_cases_that_differ_in_the_key():
    base = {"bench_device": "cuda", "weight_shape": [4096, 4096], "dtype_name": "bf16"}
    dense_1 = Measured("x::test_linear[a]", [1.0], {**base, "batch": 1, "implementation": "dense"})
    mx_1 = Measured("x::test_linear[b]", [1.5], {**base, "batch": 1, "implementation": "mxint8"})
    mx_16 = Measured("x::test_linear[c]", [9.0], {**base, "batch": 16, "implementation": "mxint8"})
    ratios = same_run_ratios(run_of(dense_1, mx_1, mx_16))
    assert ratios["x::test_linear[b]"][0][1:3] == (1.5, False)
    assert "x::test_linear[c]" not in ratios  # no dense case at batch 16


def test_ratio_collapse_is_a_regression_even_when_both_times_moved_together():
    baseline = run_of(attention("naive", 26e-6, 0), attention("flash", 10e-6, 1))
    # flash moved 5 % (under the 10 % time threshold) but naive got much faster, so fusion's
    # advantage collapsed: the speedup fell from 2.6x to 1.4x
    current = run_of(attention("naive", 14.7e-6, 2), attention("flash", 10.5e-6, 3))
    first = run_gate([baseline], current, INPUTS)
    flash = next(r for r in first if r.name.endswith("flash-fp16]"))
    assert flash.verdict is Verdict.UNCONFIRMED and "speedup over naive" in flash.message
    names = rerun_names(first, current)
    assert names == {attention("flash", 1, 0).fullname, attention("naive", 1, 0).fullname}
    again = run_of(attention("naive", 14.8e-6, 4), attention("flash", 10.4e-6, 5))
    confirmed = run_gate([baseline], current, INPUTS, again)
    flash = next(r for r in confirmed if r.name.endswith("flash-fp16]"))
    assert flash.verdict is Verdict.REGRESSION


def test_fraction_of_copy_is_gated_as_a_ratio():
    name = "perf_tests/test_mxint8.py::test_dequantize[cuda-268435456-triton-32]"
    baseline = {name: Measured(name, rounds(277e-6, 0), {}, {"fraction_of_copy": 0.99})}
    current = {name: Measured(name, rounds(277e-6, 1), {}, {"fraction_of_copy": 0.60})}
    (result,) = run_gate([baseline], current, INPUTS)
    assert result.verdict is Verdict.UNCONFIRMED
    assert "fraction of the copy roofline" in result.message


def test_peak_memory_growth_needs_no_rerun():
    name = "perf_tests/test_mxint8.py::test_encoder[cuda-bert-basex8x128-mxint8]"
    baseline = {name: Measured(name, rounds(17e-3, 0), {}, {"peak_bytes": 235_744_768})}
    current = {name: Measured(name, rounds(17e-3, 1), {}, {"peak_bytes": 300_000_000})}
    (result,) = run_gate([baseline], current, INPUTS)
    assert result.verdict is Verdict.REGRESSION and "peak memory" in result.message


def test_saved_runs_without_round_data_use_the_median():
    run = measured_from_run([{"fullname": "a::test_x", "stats": {"median": 0.5}}])
    assert run["a::test_x"].samples == [0.5] and run["a::test_x"].test == "test_x"


def test_host_bound_cases_are_reported_not_gated():
    name = "perf_tests/test_compile.py::test_resnet18_steady[cuda-1-compiled]"
    baseline = {name: Measured(name, rounds(1.46e-3, 0), {}, {"host_bound": True})}
    current = {name: Measured(name, rounds(1.80e-3, 1), {}, {"host_bound": True})}
    (result,) = run_gate([baseline], current, INPUTS)
    assert result.verdict is Verdict.UNTRUSTED and "host-bound" in result.message


def test_a_baseline_set_compares_each_benchmark_with_its_slowest_run():
    # the machine's sessions differ by 25 %: the current run sits inside that spread
    quick = run_of(attention("naive", 20e-6, 0), attention("flash", 8e-6, 1))
    slow = run_of(attention("naive", 25e-6, 2), attention("flash", 10e-6, 3))
    current = run_of(attention("naive", 24e-6, 4), attention("flash", 9.8e-6, 5))
    against_one = {r.name: r.verdict for r in run_gate([quick], current, INPUTS)}
    against_set = {r.name: r.verdict for r in run_gate([quick, slow], current, INPUTS)}
    assert Verdict.UNCONFIRMED in against_one.values()
    assert set(against_set.values()) == {Verdict.UNCHANGED}


def test_a_baseline_set_still_flags_what_is_slower_than_all_its_runs():
    quick = run_of(attention("naive", 20e-6, 0), attention("flash", 8e-6, 1))
    slow = run_of(attention("naive", 25e-6, 2), attention("flash", 10e-6, 3))
    current = run_of(attention("naive", 25e-6, 4), attention("flash", 12.5e-6, 5))
    flash = attention("flash", 1, 0).fullname
    verdicts = {r.name: r.verdict for r in run_gate([quick, slow], current, INPUTS)}
    assert verdicts[flash] is Verdict.UNCONFIRMED  # +25 % on the slowest run, not re-run yet


def test_worst_ratio_of_a_set_is_the_reference():
    good = run_of(attention("naive", 26e-6, 0), attention("flash", 10e-6, 1))  # 2.6x
    poor = run_of(attention("naive", 22e-6, 2), attention("flash", 10e-6, 3))  # 2.2x
    current = run_of(attention("naive", 21e-6, 4), attention("flash", 10e-6, 5))  # 2.1x
    flash = attention("flash", 1, 0).fullname
    verdicts = {r.name: r.verdict for r in run_gate([good, poor], current, INPUTS)}
    assert verdicts[flash] is Verdict.UNCHANGED  # -5 % on the worst, within 10 %
    verdicts = {r.name: r.verdict for r in run_gate([good], current, INPUTS)}
    assert verdicts[flash] is Verdict.UNCONFIRMED  # -19 % on the best alone


def test_an_improvement_on_a_baseline_set_must_beat_its_fastest_run():
    quick = run_of(attention("naive", 20e-6, 0), attention("flash", 8e-6, 1))
    slow = run_of(attention("naive", 20e-6, 2), attention("flash", 10e-6, 3))
    current = run_of(attention("naive", 20e-6, 4), attention("flash", 8.5e-6, 5))
    flash = attention("flash", 1, 0).fullname
    assert {r.name: r.verdict for r in run_gate([slow], current, INPUTS)}[flash] is (
        Verdict.IMPROVEMENT
    )
    assert {r.name: r.verdict for r in run_gate([quick, slow], current, INPUTS)}[flash] is (
        Verdict.UNCHANGED
    )
