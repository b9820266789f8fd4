"""``perfgate compare`` on the run fixtures of tests/data (see make_fixtures.py): three runs of one
H100 key (0003 has another torch, flash-fp16 twice as slow, math-fp16 dropped and an mxint8_fused
Linear added), and its errors: each one line on stderr and exit status 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import error_line, perfgate, refused_at_the_door

from perfgate.format import markdown

DATA = Path(__file__).resolve().parent / "data"
BASELINES = DATA / "baselines"
KEY = "NVIDIA-H100-80GB-HBM3"
FOLDER = BASELINES / KEY / "Linux-CPython-3.12-64bit"
WHERE = ["--baselines", str(BASELINES), "--hardware", KEY]
SLOWER = "test_attention[cuda-32x8x128x64-flash-fp16]"


def table(text: str) -> dict[str, list[str]]:
    """The plain-text table's rows by benchmark: cells split on runs of two or more spaces."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[start : lines.index("", start)]]
    return {row[0]: row[1:] for row in rows}


VERDICT = 5  # the verdict's column among the cells after the benchmark's name


def test_compare_defaults_to_the_newest_two_runs_and_sorts_by_severity():
    status, out, _ = perfgate("compare", *WHERE)
    assert status == 0
    assert re.search(r"^A: .*0002_rerun\.json", out, re.M)
    assert re.search(r"^B: .*0003_torch-2\.12\.json", out, re.M)
    assert "environment changed: torch 2.11.0+cu130 -> 2.12.0+cu130" in out
    rows = table(out)
    names, verdicts = list(rows), [cells[VERDICT] for cells in rows.values()]
    assert names[0] == SLOWER and verdicts[0] == "unconfirmed"  # compare never re-runs
    assert re.search(r"\+(99|100|101)\.\d %", rows[SLOWER][2]), rows[SLOWER]
    assert rows[SLOWER][6].startswith("slower by 100.") and "not confirmed" in rows[SLOWER][6]
    assert rows["test_attention[cuda-32x8x128x64-math-fp16]"][VERDICT:] == [
        "not run", "in the baseline, not run this time"]  # fmt: skip
    assert rows["test_linear[cuda-4096x4096-1-mxint8_fused-bf16]"][VERDICT:] == [
        "new", "new benchmark: not in the baseline"]  # fmt: skip
    # two cold-start rounds per run: medians only, no significance, undecided with the reason
    calls = {name: cells for name, cells in rows.items() if name.startswith("test_resnet18_calls")}
    assert len(calls) == 2
    for cells in calls.values():
        reason = (
            "undecided: too few rounds to decide (2 baseline and 2 current rounds, needs 3 a side)"
        )
        assert cells[3:] == ["-", "-", "undecided", reason, "10.0% (default 10%)"]
    order = ["unconfirmed", "undecided", "not gated", "new", "not run", "unchanged"]
    assert sorted(verdicts, key=order.index) == verdicts
    counts = "15 gated (1 unconfirmed, 14 unchanged); 2 undecided (2 too few rounds to decide); "
    assert counts + "4 not gated (4 host-bound); 1 new; 1 not run" in out
    assert "\n1 unconfirmed: compare cannot re-run a case, so it cannot confirm a regression" in out


def test_compare_by_run_number_and_name_fragment_same_environment():
    status, out, _ = perfgate("compare", "1", "rerun", *WHERE)
    assert status == 0
    assert "environment: same (torch 2.11.0+cu130, triton 3.6.0, cuda 13.0" in out
    assert "driver 580.159.04" in out
    verdicts = {cells[VERDICT] for cells in table(out).values()}
    assert verdicts == {"unchanged", "undecided", "not gated"}


def test_compare_markdown_with_glob_filter():
    status, out, _ = perfgate("compare", "0002", "0003", "--markdown", "--filter", "*sdpa*", *WHERE)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("- A: ") and lines[2].startswith("- environment changed: torch")
    rows = [line for line in lines if line.startswith("| ")]
    columns = ["benchmark", "A median", "B median", "change", "p", "B/A 95% CI", "verdict"]
    header = "| " + " | ".join([*columns, "detail", "threshold"]) + " |"
    assert rows[0] == header
    assert lines[lines.index(header) + 1].startswith("| --- | ---: | ---: | ---: |")
    names = [row.split(" | ")[0][2:] for row in rows[2:]]  # escaped: format.markdown
    assert names[0] == markdown(SLOWER) and len(names) == 6
    assert all(name.startswith(r"test_attention\[") for name in names)


def test_compare_substring_filter_and_explicit_paths():
    first, third = FOLDER / "0001_base.json", FOLDER / "0003_torch-2.12.json"
    status, out, _ = perfgate("compare", str(first), str(third), "--filter", "dequantize")
    assert status == 0
    rows = table(out)
    assert len(rows) == 5 and all(name.startswith("test_dequantize[") for name in rows)
    assert "5 gated (5 unchanged)" in out


def test_compare_json_gives_the_verdict_rows():
    status, out, _ = perfgate("compare", "0002", "0003", "--json", *WHERE)
    assert status == 0
    rows = {row["name"].split("::")[-1]: row for row in json.loads(out)["rows"]}
    text = table(perfgate("compare", "0002", "0003", *WHERE)[1])
    assert list(rows) == list(text)  # the same rows, in the same order, as the table
    slower = rows[SLOWER]
    assert (slower["verdict"], slower["gated"], slower["threshold"]) == ("unconfirmed", True, 0.1)
    ratio = slower["current_median_s"] / slower["baseline_median_s"]
    assert slower["change_percent"] == (ratio - 1) * 100 and 1.9 < ratio < 2.1
    assert slower["message"] == text[SLOWER][6]
    dropped = rows["test_attention[cuda-32x8x128x64-math-fp16]"]
    assert (dropped["verdict"], dropped["gated"], dropped["baseline_median_s"]) == (
        "not run", False, None)  # fmt: skip


def test_a_threshold_for_a_test_function_in_any_case():
    args = ["compare", "0002", "0003", "--json", "--threshold", "Test_Attention=100%", *WHERE]
    status, out, _ = perfgate(*args)
    assert status == 0
    rows = {row["name"].split("::")[-1]: row for row in json.loads(out)["rows"]}
    assert rows[SLOWER]["threshold"] == 1.0 and "threshold 100%" in rows[SLOWER]["message"]
    others = {r["threshold"] for name, r in rows.items() if "attention" not in name and r["gated"]}
    assert others == {0.1}


# --- errors: one line, exit 2 ----------------------------------------------------------------
def test_a_filter_that_matches_nothing_says_so(tmp_path):
    for output in ([], ["--markdown"], ["--json"]):
        status, out, err = perfgate("compare", "0002", "0003", "--filter", "zzz", *output, *WHERE)
        assert (status, out) == (2, ""), output
        assert "no benchmark matches --filter zzz" in error_line(err, "compare")


def test_an_unknown_or_bad_threshold_is_refused(capsys):
    status, out, err = perfgate("compare", "0002", "0003", "--threshold", "sdpaa=20%", *WHERE)
    line = error_line(err, "compare")
    assert (status, out) == (2, "")
    assert "--threshold names no family or test in these runs: sdpaa" in line
    assert "valid names: test_attention, test_dequantize" in line
    args = ("compare", "0002", "0003", "--threshold", "test_attention=-5%", *WHERE)
    assert "a percentage of 0 or more" in refused_at_the_door(capsys, *args)


def test_a_threshold_takes_the_gates_units(capsys):
    """0.5 and 50% are the same threshold; a bare 50 is ambiguous and refused in one line."""
    rows = []
    for spec in ("0.5", "50%", "test_attention=50%"):
        status, out, err = perfgate(
            "compare", "0002", "0003", "--json", "--threshold", spec, *WHERE
        )
        assert status == 0, err
        rows.append(
            {r["name"]: r["threshold"] for r in json.loads(out)["rows"] if "attention" in r["name"]}
        )
    assert rows[0] == rows[1] == rows[2] and set(rows[0].values()) == {0.5, None}  # None: not run
    line = refused_at_the_door(capsys, "compare", "0002", "0003", "--threshold", "50", *WHERE)
    assert "threshold '50' is ambiguous: write 50% or 0.5" in line


def test_missing_run_file_names_it_and_exits_2(tmp_path):
    missing = tmp_path / "nothere.json"
    status, out, err = perfgate("compare", str(missing), "0001", *WHERE)
    assert status == 2 and out == ""
    assert f"run file {missing} does not exist" in error_line(err, "compare")


def test_damaged_benchmark_or_bad_rounds_name_the_file(tmp_path):
    rerun = str(FOLDER / "0002_rerun.json")
    run = json.loads((FOLDER / "0001_base.json").read_text())
    run["benchmarks"][0]["stats"]["data"][0] = 0.0  # a zero-second round: a broken timer
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(run))
    status, _, err = perfgate("compare", str(zero), rerun)
    line = error_line(err, "compare")
    assert status == 2
    assert f"{zero}: benchmarks[0] (perf_tests/test_compile.py::" in line and "positive" in line
    assert "write it again" in line  # not in a store: no git to restore it from
    run = json.loads((FOLDER / "0001_base.json").read_text())
    del run["benchmarks"][1]["stats"]
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(run))
    status, _, err = perfgate("compare", str(damaged), rerun)
    assert status == 2
    assert f"{damaged}: benchmarks[1] has no name, fullname or stats" in error_line(err, "compare")


def test_unknown_or_ambiguous_run_lists_the_saved_runs():
    status, _, err = perfgate("compare", "0042", "0001", *WHERE)
    line = error_line(err, "compare")
    assert status == 2 and "no run '0042'" in line and "0003_torch-2.12.json" in line
    status, _, err = perfgate("compare", "r", "0001", *WHERE)  # rerun, torch-2.12
    assert status == 2 and "'r' names several runs" in error_line(err, "compare")


def test_the_same_run_twice_is_refused():
    status, _, err = perfgate("compare", "0002", str(FOLDER / "0002_rerun.json"), *WHERE)
    assert status == 2 and "RUN_A and RUN_B are the same file" in error_line(err, "compare")


def test_no_runs_for_the_hardware_suggests_the_folders_there():
    status, _, err = perfgate("compare", "--baselines", str(BASELINES), "--hardware", "NO-GPU")
    line = error_line(err, "compare")
    assert status == 2
    assert "no baseline for this hardware (NO-GPU)" in line
    assert f"keys with runs there: {KEY}" in line and "--benchmark-save" in line


def test_compare_needs_two_runs(tmp_path):
    folder = tmp_path / "ONE" / "machine"
    folder.mkdir(parents=True)
    (folder / "0001_only.json").write_text((FOLDER / "0001_base.json").read_text())
    status, _, err = perfgate("compare", "--baselines", str(tmp_path), "--hardware", "ONE")
    assert status == 2 and "only 1 saved run" in error_line(err, "compare")


def test_counted_runs_show_their_counts_and_the_torch_change(tmp_path):
    """Instruction-count runs have no medians to show: the detail says the counts."""
    sessions = Path(__file__).resolve().parent.parent / "docs" / "gate-validation"
    a = next((sessions.parent.parent / "baselines" / "callgrind-x86_64-AVX2").rglob("0003_*.json"))
    b = json.loads((sessions / "instructions-session5" / "aa-1.run.json").read_text())
    b["machine_info"]["perfgate"]["software"]["torch"] = "2.14.0+cpu"
    (tmp_path / "b.json").write_text(json.dumps(b))
    status, out, _ = perfgate("compare", str(a), str(tmp_path / "b.json"))
    assert status == 0
    assert "environment changed: torch 2.13.0+cpu -> 2.14.0+cpu" in out
    row = table(out)["test_host_overhead[naive-attention-1x4x16x32]"]
    assert row[VERDICT] == "unchanged" and row[VERDICT + 1].startswith("instructions per call")
    assert row[0].endswith(" instr") and row[1].endswith(" instr") and row[3] == "exact"


# --- timed and counted runs in pytest-benchmark's own folder -----------------------------------
def kind_run(folder: Path, number: int, counted: bool, median: float) -> None:
    """A run of t.py::test_a and test_b saved as pytest-benchmark saves it: timed (seconds), or
    counted (``--perf-measure instructions``: instructions per call, a callgrind time beside)."""
    entries = []
    for name in ("test_a", "test_b"):
        data = [median * (1 + 0.001 * (i % 7)) for i in range(30)]
        extra = {"measure": "instructions", "instructions": round(median * 1e9)} if counted else {}
        stats = {"median": sorted(data)[15], "data": data, "rounds": 30, "iterations": 1}
        entries.append({"name": name, "fullname": f"t.py::{name}", "params": {}, "group": None,
                        "extra_info": extra, "options": {}, "stats": stats})  # fmt: skip
    run = {"machine_info": {"node": "ci"}, "commit_info": {"id": "abc"}, "benchmarks": entries,
           "datetime": f"2026-11-{19 + number:02d}T10:00:00+00:00"}  # fmt: skip
    kind = "counted" if counted else "timed"
    (folder / f"{number:04d}_{kind}.json").write_text(json.dumps(run))


@pytest.fixture
def both_kinds(tmp_path, monkeypatch) -> Path:
    """A project gating both: .benchmarks/<machine>/ holds timed runs (about 52 us) and counted
    runs (about 1.2 ms of callgrind time) in turn, newest counted."""
    folder = tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit"
    folder.mkdir(parents=True)
    for number, counted, median in [(1, False, 51.8e-6), (2, True, 1.20e-3),
                                    (3, False, 53.9e-6), (4, True, 1.21e-3)]:  # fmt: skip
        kind_run(folder, number, counted, median)
    monkeypatch.chdir(tmp_path)
    return folder


@pytest.mark.parametrize(
    "runs, a, b",
    [([], "0002_counted", "0004_counted"), (["0001"], "0001_timed", "0003_timed"),
     (["0002"], "0002_counted", "0004_counted"), (["0001", "0003"], "0001_timed", "0003_timed")],
)  # fmt: skip
def test_compare_picks_runs_of_one_kind(both_kinds, runs, a, b):
    status, out, err = perfgate("compare", *runs)
    assert status == 0, err
    assert f"A: {both_kinds / a}.json" in out and f"B: {both_kinds / b}.json" in out
    assert "improvement" not in out and "unconfirmed" not in out  # +4 % and +0.8 %: unchanged


def test_compare_refuses_a_timed_run_against_a_counted_one(both_kinds):
    status, out, err = perfgate("compare", "0002", "0003")
    line = error_line(err, "compare")
    assert status == 2 and out == ""
    assert "0002_counted.json is a counted run and 0003_timed.json a timed one" in line


def test_history_keeps_one_series_per_kind(both_kinds):
    status, out, err = perfgate("history", "test_a", "--no-plots")
    assert status == 0, err
    timed, counted = out.split("counted runs (2 of 4):")
    assert timed.startswith("timed runs (2 of 4):")
    assert "0001_timed" in timed and "0003_timed" in timed and "_counted" not in timed
    assert "0002_counted" in counted and "0004_counted" in counted and "_timed" not in counted
    assert "+4.1 %" in timed and "+0.8 %" in counted and "-95" not in out
