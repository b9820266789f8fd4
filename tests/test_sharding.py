"""--perf-shard I/N and ``perfgate merge``: the split, its refusals, and two shards merged into the
run an unsharded session makes (same cases, samples and verdicts), timed on a virtual clock whose
every reading is exact whatever the order of the cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    full_disk,
    make_cases_project,
    perfgate,
    report_verdicts,
    run_cases,
    samples,
    saved_runs,
    shard_run,
)

from perfgate import parts
from perfgate.cli.merge import MERGE_REFUSED
from perfgate.fields import KEPT_ROUNDS


@pytest.fixture
def cases_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return make_cases_project(pytester, monkeypatch)


# --- the split ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["1/2", "2/2", " 3 / 4 ", "1/1"])
def test_shard_values_that_name_a_part(text):
    index, count = parts.parse(text)
    assert 1 <= index <= count


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "1", "a/b", "", "1/2/3", "-1/2"])
def test_shard_values_that_name_no_part_say_how_to_give_one(text):
    with pytest.raises(ValueError, match=r"--perf-shard .*e\.g\. 1/"):
        parts.parse(text)


def test_split_balances_stored_durations_longest_first():
    stored = {"a": 8.0, "b": 5.0, "c": 4.0, "d": 3.0}
    part = parts.split(["d", "c", "b", "a"], stored, 2)
    load = {i: sum(stored[n] for n in part if part[n] == i) for i in (1, 2)}
    assert part == {"a": 1, "b": 2, "c": 2, "d": 1} and load == {1: 11.0, 2: 9.0}


def test_cases_without_a_stored_duration_count_as_the_mean_case():
    part = parts.split(["a", "b", "new1", "new2"], {"a": 3.0, "b": 1.0}, 2)
    assert part == {"a": 1, "new1": 2, "new2": 2, "b": 1}  # each new case counts 2.0: 4 and 4
    assert set(parts.split(["x", "y", "z", "w"], {}, 2).values()) == {1, 2}  # none stored


def test_split_is_the_same_in_any_collection_order_and_covers_every_case_once():
    names = [f"perf_tests/test_x.py::test_x[{i}]" for i in range(50)]
    stored = {name: float(i % 7) for i, name in enumerate(names[:30])}
    first = parts.split(names, stored, 4)
    assert first == parts.split(list(reversed(names)), stored, 4)
    assert sorted(first) == sorted(names) and set(first.values()) == {1, 2, 3, 4}


def test_a_case_and_its_ratio_partners_go_to_one_part():
    groups = {"t[a]": "t", "t[b]": "t", "t[c]": "t"}
    part = parts.split(["t[a]", "t[b]", "t[c]", "u", "v"], {}, 2, groups)
    assert part["t[a]"] == part["t[b]"] == part["t[c]"] == 1 and part["u"] == part["v"] == 2


@pytest.mark.parametrize("value", ["0/2", "two", "", "1/1000000000"])
def test_a_bad_shard_is_one_usage_line(cases_project, value):  # "": an unset CI variable
    result = run_cases(cases_project, f"--perf-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "--perf-shard" in output and "e.g. 1/" in output and "Traceback" not in output


# --- two shards merged are the unsharded run ----------------------------------------------------
@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["alone", "xdist"])
@pytest.mark.slow
def test_two_shards_merged_give_the_unsharded_cases_samples_and_verdicts(
    cases_project, monkeypatch, workers
):
    assert run_cases(cases_project, "--benchmark-save=base").ret == 0
    base = str(saved_runs(cases_project)[0])
    monkeypatch.setenv("PERFGATE_SLOW_CASE", "b")
    whole = run_cases(cases_project, "--perf-gate", "--benchmark-json=whole.json",
                "--perf-gate-report=whole/gate.md")  # fmt: skip
    assert whole.ret == pytest.ExitCode.TESTS_FAILED, whole.stdout.str()
    shard_verdicts = {}
    for index in (1, 2):
        shard = run_cases(cases_project, *workers, "--perf-gate", f"--perf-shard={index}/2",
                    f"--benchmark-json=shard{index}.json",
                    f"--perf-gate-report=shard{index}/gate.md")  # fmt: skip
        shard.stdout.fnmatch_lines([f"*shard {index}/2*", "*deselected*" if not workers else "*"])
        assert "not run" not in shard.stdout.str()  # the other shard's cases are its own
        recorded = json.loads((cases_project.path / f"shard{index}.json").read_text())
        assert recorded["machine_info"]["perfgate"]["shard"] == {"index": index, "count": 2}
        shard_verdicts.update(report_verdicts(cases_project.path / f"shard{index}" / "gate.json"))
    shard_cases = [set(samples(cases_project.path / f"shard{i}.json")) for i in (1, 2)]
    assert shard_cases[0] and shard_cases[1] and not shard_cases[0] & shard_cases[1]
    first = {f"test_cases.py::test_first[{case}]" for case in "abc"}  # ratio partners
    assert first <= shard_cases[0] or first <= shard_cases[1]
    status, out, _ = perfgate("merge", "shard2.json", "shard1.json", "--out", "merged.json")
    assert status == 0 and "merged.json (5 cases)" in out
    merged, unsharded = cases_project.path / "merged.json", cases_project.path / "whole.json"
    assert samples(merged) == samples(unsharded)
    # the gate's verdicts: the shards' gates together are the unsharded gate's
    assert shard_verdicts == report_verdicts(cases_project.path / "whole" / "gate.json")
    assert shard_verdicts["test_cases.py::test_first[b]"] == "regression"
    # perfgate compare reads the merged run as the unsharded one
    compared = []
    for current in ("merged.json", "whole.json"):
        status, out, _ = perfgate("compare", base, current, "--json")
        assert status == 0
        compared.append({row["name"]: row["verdict"] for row in json.loads(out)["rows"]})
    assert compared[0] == compared[1] and compared[0]["test_cases.py::test_first[b]"] != "unchanged"


def test_a_merged_run_saved_into_the_store_is_the_gates_baseline(cases_project):
    for index in (1, 2):
        assert (
            run_cases(
                cases_project, f"--perf-shard={index}/2", f"--benchmark-json=s{index}.json"
            ).ret
            == 0
        )
    status, out, _ = perfgate(
        "merge", "s1.json", "s2.json", "--save", "merged", "--baselines", "baselines"
    )
    assert status == 0 and "0001_merged.json (5 cases)" in out
    result = run_cases(cases_project, "--perf-gate")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*comparing with *0001_merged.json*"])


# --- what merge refuses --------------------------------------------------------------------------


REFUSED = {
    "another key": ([shard_run(1, 2, ["a"]), shard_run(2, 2, ["b"], key="OTHER")],
                    "shards ran on different hardware (1/2: KEY, 2/2: OTHER)"),
    "another commit": ([shard_run(1, 2, ["a"]), shard_run(2, 2, ["b"], commit="def")],
                       "shards ran on different commits (1/2: abc, 2/2: def)"),
    "a case twice": ([shard_run(1, 2, ["a"]), shard_run(2, 2, ["a"])],
                     "t.py::a was run by both shard 1/2 and shard 2/2"),
    "a missing shard": ([shard_run(1, 3, ["a"]), shard_run(3, 3, ["b"])],
                        "shard 2/3 is missing; give all 3 shard runs"),
    "a shard twice": ([shard_run(1, 2, ["a"]), shard_run(1, 2, ["b"])], "shard 1/2 is given twice"),
    "two splits": ([shard_run(1, 2, ["a"]), shard_run(2, 3, ["b"])], "of different splits"),
    "no shard": ([shard_run(1, 1, ["a"]) | {"machine_info": {"perfgate": {}}}],
                 "is not a shard run (no --perf-shard I/N recorded in it)"),
}  # fmt: skip


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_merge_refuses_runs_that_are_not_the_shards_of_one_run(tmp_path, monkeypatch, why):
    monkeypatch.chdir(tmp_path)
    runs, line = REFUSED[why]
    paths = []
    for number, data in enumerate(runs):
        paths.append(f"run{number}.json")
        (tmp_path / paths[-1]).write_text(json.dumps(data))
    status, out, err = perfgate("merge", *paths, "--out", "merged.json")
    assert status == MERGE_REFUSED, err
    assert err.count("\n") == 1 and line in err and err.startswith("perfgate merge: refused: ")
    assert not (tmp_path / "merged.json").exists()


def _with(run: dict, path: str, value: object) -> dict:
    """``run`` with the field at dotted ``path`` set to ``value``."""
    *parents, last = path.split(".")
    place = run
    for name in parents:
        place = place.setdefault(name, {})
    place[last] = value
    return run


BADLY_TYPED = {
    "0/0 alone": ([shard_run(0, 0, ["a"])], "shard 0/0 names no part (I must be 1 to N)"),
    "3/2 with 1/2 and 2/2": ([shard_run(1, 2, ["a"]), shard_run(2, 2, ["b"]),
                              shard_run(3, 2, ["c"])], "shard 3/2 names no part"),
    "N of 10**12": ([shard_run(1, 10**12, ["a"])], "N must be at most 1000"),
    "index '1'": ([_with(shard_run(1, 2, ["a"]), "machine_info.perfgate.shard.index", "1"),
                   shard_run(2, 2, ["b"])], "shard '1'/2 names no part (I and N must be whole"),
    "count 2.0": ([shard_run(1, 2.0, ["a"]), shard_run(2, 2, ["b"])], "shard 1/2.0 names no part"),
    "a list as commit": ([_with(shard_run(1, 2, ["a"]), "commit_info.id", ["a"]),
                          shard_run(2, 2, ["b"])], "commit_info.id must be a string"),
    "an absolute key": ([shard_run(1, 1, ["a"], key="/tmp/elsewhere")],
                        "hardware_key '/tmp/elsewhere' cannot be a folder name"),
    "a key that climbs": ([shard_run(1, 1, ["a"], key="../../..")], "cannot be a folder name"),
    "the key ..": ([shard_run(1, 1, ["a"], key="..")], "hardware_key '..' cannot be a folder"),
    "reasons not a list": ([_with(shard_run(1, 1, ["a"]), "machine_info.perfgate.gpu_health",
                                  {"trusted": False, "untrusted_reasons": 5})],
                           "untrusted_reasons must be a list of strings"),
}  # fmt: skip


@pytest.mark.parametrize("why", sorted(BADLY_TYPED))
def test_merge_names_a_badly_typed_shard_field_in_one_line_and_writes_nothing(
    tmp_path, monkeypatch, why
):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    runs, line = BADLY_TYPED[why]
    paths = []
    for number, data in enumerate(runs):
        paths.append(f"run{number}.json")
        Path(paths[-1]).write_text(json.dumps(data))
    status, out, err = perfgate("merge", *paths, "--out", "merged.json", "--save", "m")
    assert status == 2 and err.count("\n") == 1 and line in err, err
    assert "Traceback" not in err and out == ""
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert [str(p) for p in written] == [f"work/{p}" for p in paths]


def test_merge_saves_only_under_baselines_whatever_machine_the_shards_record(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for index in (1, 2):
        run = _with(shard_run(index, 2, [f"c{index}"]), "machine_info.system", "../../../x")
        (tmp_path / f"s{index}.json").write_text(json.dumps(run))
    status, _, err = perfgate("merge", "s1.json", "s2.json", "--save", "m",
                              "--baselines", "store/bl")  # fmt: skip
    assert status == 2 and "machine id '../../../x-Python--64bit' cannot be a folder" in err, err
    assert not [p for p in tmp_path.rglob("*.json") if p.name.endswith("_m.json")]


def test_a_merged_run_keeps_at_most_the_rounds_a_saved_run_keeps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for index in (1, 2):
        run = shard_run(index, 2, [f"c{index}"])
        run["benchmarks"][0]["stats"]["data"] = [1.0 + i * 1e-6 for i in range(KEPT_ROUNDS * 3)]
        (tmp_path / f"s{index}.json").write_text(json.dumps(run))
    status, _, err = perfgate("merge", "s1.json", "s2.json", "--out", "m.json", "--save", "m",
                              "--baselines", "baselines")  # fmt: skip
    assert status == 0, err
    for path in [tmp_path / "m.json", *tmp_path.glob("baselines/KEY/*/0001_m.json")]:
        stats = [b["stats"] for b in json.loads(path.read_text())["benchmarks"]]
        assert [len(s["data"]) for s in stats] == [KEPT_ROUNDS] * 2
        assert [s["rounds_kept"] for s in stats] == [KEPT_ROUNDS] * 2


def test_merge_never_writes_over_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for index in (1, 2):
        (tmp_path / f"s{index}.json").write_text(json.dumps(shard_run(index, 2, [f"c{index}"])))
    (tmp_path / "merged.json").write_text("mine")
    status, _, err = perfgate("merge", "s1.json", "s2.json", "--out", "merged.json")
    assert status == 2 and "merged.json exists; name a new file" in err
    assert (tmp_path / "merged.json").read_text() == "mine"


@pytest.mark.parametrize(
    "argv, line",
    [
        (["s1.json", "broken.json", "--out", "m.json"], "broken.json is not valid JSON"),
        (["s1.json", "s2.json"], "give --out RUN.json, --save NAME, or both"),
        (["s1.json", "s2.json", "--save", "a/b"], "--save 'a/b': a name may not"),
    ],
)
def test_merge_says_in_one_line_what_it_cannot_read_or_write(tmp_path, monkeypatch, argv, line):
    monkeypatch.chdir(tmp_path)
    for index in (1, 2):
        (tmp_path / f"s{index}.json").write_text(json.dumps(shard_run(index, 2, [f"c{index}"])))
    (tmp_path / "broken.json").write_text('{"benchmarks": [')
    status, _, err = perfgate("merge", *argv)
    assert status == 2 and err.count("\n") == 1 and line in err, err
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "baselines").exists()


# --- the nightly's fan-in (perfgate nightly --shards): the same check of the labels ------------
def write_night(folder: Path, label: str, name: str) -> Path:
    """A shard's results folder whose night says ``label`` (as its --perf-shard I/N wrote it)."""
    from perfgate.verdict import nightly as policy
    from perfgate.verdict.outcome import Verdict
    from perfgate.verdict.rows import GateRow

    folder.mkdir(parents=True)
    row = GateRow(f"t.py::{name}", Verdict.UNCHANGED, change_percent=0.1)
    night = policy.Night([policy.NightRow(row, policy.STORED, "unchanged +0.1%", None, None)],
                         "abc", 3, 0.03, 0.01, shard=label)  # fmt: skip
    (folder / "nightly-verdicts.json").write_text(json.dumps(policy.as_json(night)))
    return folder


FAN_IN_REFUSED = {
    "0/0 alone": (["0/0"], "shard 0/0 names no part (I must be 1 to N)"),
    "3/2 beside 1/2 and 2/2": (["1/2", "2/2", "3/2"], "shard 3/2 names no part"),
    "-1/2 beside 1/2 and 2/2": (["1/2", "2/2", "-1/2"], "shard '-1/2' names no part"),
    "1/abc": (["1/abc"], "shard '1/abc' names no part (not I/N)"),
    "N of 10**12": (["1/1000000000000"], "N must be at most 1000"),
    "N of 1000 with one part": (["1/1000"], "shard 2/1000, 3/1000"),
    "a part twice": (["1/2", "1/2", "2/2"], "shard 1/2 is given twice"),
    "two splits": (["1/2", "2/3"], "the shards are of different splits"),
}


@pytest.mark.parametrize("why", sorted(FAN_IN_REFUSED))
def test_the_nightly_fan_in_refuses_shard_labels_that_are_not_one_split(tmp_path, why):
    labels, line = FAN_IN_REFUSED[why]
    folders = [str(write_night(tmp_path / f"s{i}", label, f"c{i}"))
               for i, label in enumerate(labels)]  # fmt: skip
    status, out, err = perfgate("nightly", "--shards", *folders, "--results", str(tmp_path / "r"))
    assert status == 3 and err.count("\n") == 1 and line in err, err
    assert err.startswith("perfgate nightly: refused: ") and out == ""
    assert not (tmp_path / "r").exists()


def test_the_nightly_fan_in_joins_the_n_parts_of_one_split(tmp_path):
    folders = [str(write_night(tmp_path / f"s{i}", f"{i}/2", f"c{i}")) for i in (2, 1)]
    status, out, err = perfgate("nightly", "--shards", *folders, "--results", str(tmp_path / "r"))
    assert status == 0, err
    assert (tmp_path / "r" / "nightly-verdicts.json").is_file()


@pytest.mark.parametrize("writes", [0, 1, 2])  # fills at nightly.md, -verdicts.json, -gate.json
def test_a_full_disk_at_the_nights_last_writes_is_one_line_not_a_regression(
    tmp_path, monkeypatch, writes
):
    folders = [str(write_night(tmp_path / f"s{i}", f"{i}/2", f"c{i}")) for i in (1, 2)]
    results = tmp_path / "r"
    results.mkdir()
    (results / "nightly-gate.json").write_text('{"format": 1, "rows": []}\n')  # last night's
    full_disk(monkeypatch, results, writes)
    status, out, err = perfgate("nightly", "--shards", *folders, "--results", str(results))
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("perfgate nightly: error: could not write nightly") and "No space" in err
    assert (results / "nightly-gate.json").read_text() == '{"format": 1, "rows": []}\n'
    assert not [p.name for p in results.iterdir() if ".writing-" in p.name]
    for path in results.iterdir():
        assert path.stat().st_size > 0  # never a 0-byte or half file
