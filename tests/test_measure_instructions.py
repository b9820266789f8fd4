"""Instruction counts and exact counters: the verdict (the rules InstructionCount and
ExactCounters), the function diff, and how counts are read and stored (the --perf-measure option
end to end: tests/test_session_instruction_cases.py)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch

from perfgate.benchmark import Benchmark, run_from_json
from perfgate.measure import callgrind, callgrind_inject
from perfgate.measure import instructions as counters
from perfgate.verdict import summary
from perfgate.verdict.attribution import function_diff
from perfgate.verdict.judge import Verdict, judge
from perfgate.verdict.rows import GateRow, as_json, from_json
from perfgate.verdict.rules import Case, findings


def case(instructions: int, functions=(), **exact) -> dict:
    return {
        "measure": "instructions",
        "instructions": instructions,
        "counters": {"aten_ops": 69, "python_calls": 471, **exact},
        "top_functions": [list(f) for f in functions],
    }


def diff(before: dict, now: dict, **options) -> list[str]:
    """``function_diff`` of two counted cases stored as ``before`` and ``now``."""
    sides = [Benchmark("t.py::case", "case", extra_info=side) for side in (before, now)]
    return function_diff(*sides, **options)


def counter_findings(before: dict, now: dict, tolerance=None) -> tuple[list[str], list[str]]:
    """(regressions, improvements) the instruction rules find; ``tolerance`` as a marker."""
    sides = [Benchmark("t.py::case", "case", extra_info=side) for side in (before, now)]
    found = findings("instructions", Case("t.py::case", *sides, marker=tolerance))
    return [f.message for f in found if f.worse], [f.message for f in found if not f.worse]


FUNCTIONS = [("sgemm", 7_000_000), ("_PyEval_EvalFrameDefault", 900_000), ("malloc", 50_000)]


@pytest.mark.parametrize("change", [0, 0.009, -0.009])
def test_counts_within_the_tolerance_pass(change):
    assert counter_findings(case(1_000_000), case(round(1e6 * (1 + change)))) == ([], [])


def test_more_instructions_than_the_tolerance_is_a_regression():
    regressions, improvements = counter_findings(case(1_000_000), case(1_011_000))
    assert improvements == []
    assert len(regressions) == 1 and "+1.10%" in regressions[0] and "1,011,000" in regressions[0]


def test_a_tighter_tolerance_catches_a_smaller_increase():
    assert counter_findings(case(1_000_000), case(1_006_000))[0] == []
    assert counter_findings(case(1_000_000), case(1_006_000), tolerance=0.005)[0]


def test_fewer_instructions_is_an_improvement():
    regressions, improvements = counter_findings(case(1_000_000), case(980_000))
    assert regressions == [] and "-2.00%" in improvements[0]


@pytest.mark.parametrize("name", ["aten_ops", "python_calls", "recompiles"])
def test_any_increase_of_an_exact_counter_fails_and_a_decrease_improves(name):
    base = case(1_000_000, recompiles=0)
    more = case(1_000_000, **{name: base["counters"][name] + 1})
    fewer = case(1_000_000, **{name: base["counters"][name] - 1})
    assert [m.split()[0] for m in counter_findings(base, more)[0]] == [name]
    assert [m.split()[0] for m in counter_findings(base, fewer)[1]] == [name]


def test_a_counter_on_one_side_only_is_not_compared():
    assert counter_findings(case(10), case(10, graph_breaks=3)) == ([], [])


@pytest.mark.parametrize("tolerance", [-0.01, 1.0, True, "1%"])
def test_a_bad_tolerance_is_rejected(tolerance):
    with pytest.raises(ValueError, match="tolerance"):
        counter_findings(case(10), case(10), tolerance)


@pytest.mark.parametrize("value", [0, None, True, "100"])
def test_a_bad_instruction_count_names_its_side(value):
    with pytest.raises(ValueError, match="current instructions"):
        counter_findings(case(10), {**case(10), "instructions": value})


def test_function_diff_lists_the_largest_changes_first():
    now = [("sgemm", 7_000_000), ("_PyEval_EvalFrameDefault", 901_000), ("crc32_z", 80_000)]
    lines = diff(case(1, FUNCTIONS), case(1, now), top=2)
    assert lines[1] == "+80,000 crc32_z (baseline not in top -> now 80,000)"
    assert lines[2] == "-50,000 malloc (baseline 50,000 -> now not in top)"
    assert len(lines) == 3 and lines[0].startswith("top 2 functions")


def test_function_diff_matches_names_that_change_between_processes():
    before = [("???:0x0000000039710000 [???]", 400), ("ceval.c:_PyEval_EvalFrameDefault [lib]", 70)]
    now = [("???:0x000000003d6b7000 [???]", 400), ("ceval.c:_PyEval_EvalFrameDefault'2 [lib]", 90)]
    lines = diff(case(1, before), case(1, now))
    assert lines[1:] == ["+20 ceval.c:_PyEval_EvalFrameDefault [lib] (baseline 70 -> now 90)"]


def test_function_diff_without_changes_says_so():
    assert diff(case(1, FUNCTIONS), case(1, FUNCTIONS)) == [
        "no change in the stored per-function counts"
    ]


def test_the_allocator_is_left_out_of_the_count_and_of_the_diff_but_shown():
    functions = {"malloc.c:_int_free [libc.so.6]": 300, "malloc.c:malloc [libc.so.6]": 100}
    assert callgrind.counted(1_000, {**functions, "ceval.c:f [lib]": 600}) == 600
    before = {**case(1, [("malloc.c:_int_free [libc.so.6]", 300), ("f", 10)]),
              "allocator_instructions": 400}  # fmt: skip
    now = {**case(1, [("malloc.c:_int_free [libc.so.6]", 900), ("f", 12)]),
           "allocator_instructions": 1_000}  # fmt: skip
    lines = diff(before, now)
    assert lines[1:] == [
        "+2 f (baseline 10 -> now 12)",
        "not counted: the allocator (glibc malloc.c) 400 -> 1,000 per call",
    ]


def test_a_small_function_worth_a_share_of_the_case_is_listed_beyond_the_top_100():
    counts = {f"f{i}": 10_000 - i for i in range(150)} | {"crc32_z": 600, "tiny": 5}
    listed = dict(callgrind.listed_functions(counts, 500_000))  # 0.1 %: 500 instructions
    assert len(listed) == 151 and "crc32_z" in listed and "tiny" not in listed


def test_counts_that_left_out_other_functions_are_not_compared():
    before = case(1_000_000)  # an older baseline: the allocator was counted
    now = {**case(900_000), "uncounted": counters.UNCOUNTED}
    (result,) = pair(before, now)
    assert result.verdict is Verdict.NOT_GATED
    assert "counted instructions another way" in result.message
    assert "--benchmark-save" in result.message


def test_the_key_names_the_instruction_set_not_the_cpu_model():
    key = counters.hardware_key()
    capability = torch.backends.cpu.get_cpu_capability()
    assert key.startswith("callgrind-") and key.endswith(counters.counted_capability())
    assert key.endswith("AVX2" if capability == "AVX512" else capability)
    assert "cores" not in key


def test_a_machine_with_avx512_counts_the_avx2_code_valgrind_runs(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert counters.counted_capability() == "AVX2"
    assert counters.hardware_key().endswith("-AVX2")


def counted_run(extra: dict, threshold=None):
    declared = {} if threshold is None else {"perfgate": {"threshold": threshold}}
    stats = {"data": [1e-9 * extra["instructions"]] * 3}
    entry = {"name": "case", "fullname": "t.py::case", "stats": stats}
    return run_from_json({"benchmarks": [{**entry, "extra_info": {**extra, **declared}}]}, None)


def pair(before: dict, now: dict, threshold=None) -> list:
    """The one verdict path on a baseline run and a current run of one counted case."""
    return judge([counted_run(before, threshold)], counted_run(now, threshold))


def test_the_gate_fails_a_count_regression_at_once_with_the_function_diff():
    now = [*FUNCTIONS, ("crc32_z", 100_000)]
    (result,) = pair(case(8_000_000, FUNCTIONS), case(8_100_000, now))
    assert result.verdict is Verdict.REGRESSION  # no re-run: counts do not need confirming
    assert "crc32_z" in result.details[1]


def test_a_counted_row_of_gate_json_carries_the_counts_and_their_change():
    (result,) = pair(case(8_000_000), case(8_100_000))
    (row,) = from_json(json.loads(json.dumps(as_json([GateRow.of(result)]))))
    assert (row.baseline_instructions, row.current_instructions) == (8_000_000, 8_100_000)
    assert row.change_percent == pytest.approx(1.25)
    assert row.baseline_median_s is None  # seconds are not what a count measured
    line = summary.terminal_lines([result], [], "base")[2]  # the table's columns: the counts
    assert line.startswith("  t.py::case | 8,000,000 instr | 8,100,000 instr | +1.2 % | exact | ")


def test_the_gate_passes_equal_counts_and_reports_fewer_as_an_improvement():
    same, fewer = case(8_000_000), case(7_000_000)
    assert pair(same, same)[0].verdict is Verdict.UNCHANGED
    assert pair(same, fewer)[0].verdict is Verdict.IMPROVEMENT


def test_a_threshold_marker_sets_the_tolerance_of_a_count():
    before, now = case(1_000_000), case(1_006_000)
    assert pair(before, now)[0].verdict is Verdict.UNCHANGED
    assert pair(before, now, threshold=0.005)[0].verdict is Verdict.REGRESSION


def test_short_names_drop_build_paths_but_keep_the_library():
    name = "/tmp/python-build.123/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault [/x/libpython3.11.so.1.0]"  # noqa: E501
    assert (
        callgrind.short_name(name)
        == "Python/ceval.c:_PyEval_EvalFrameDefault [libpython3.11.so.1.0]"
    )  # noqa: E501
    assert callgrind.short_name("./malloc/./malloc/malloc.c:_int_free [/usr/lib/libc.so.6]") == (
        "malloc.c:_int_free [libc.so.6]"
    )


@pytest.mark.parametrize("value", ["one", "1.5", "-0.1"])
def test_a_bad_injection_fraction_says_what_is_expected(monkeypatch, value):
    monkeypatch.setenv(callgrind_inject.INJECT_VARIABLE, value)
    with pytest.raises(ValueError, match="expected a fraction"):
        callgrind_inject.inject_fraction()


requires_valgrind = pytest.mark.skipif(
    bool(callgrind.missing_tools()), reason="valgrind is not installed"
)


@requires_valgrind
def test_annotate_reads_every_function_of_a_real_dump(tmp_path):
    out = tmp_path / "callgrind.out"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", shutil.which("true")],
        capture_output=True,
        check=True,
    )
    total, functions = callgrind.annotate(out)
    assert total > 10_000
    assert sum(functions.values()) == total  # threshold 100 %: every function is listed
