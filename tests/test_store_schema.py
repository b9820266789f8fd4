"""The store checks what it reads: badly typed fields, runs from the future, datetimes with UTC
offsets, symlinked folders, another hardware's runs. Each is one line before anything runs."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from helpers import assert_one_line, run, saved_runs

from perfgate import store
from perfgate.cli import main
from perfgate.session.baseline import GATE_NOT_RUN
from perfgate.store import baseline

KEY = "AMD-EPYC-2cores"


def run_json(stamp: str, **changes) -> dict:
    stats = {"median": 1e-3, "data": [1e-3, 1.1e-3, 0.9e-3]}
    benchmark = {"name": "test_a", "fullname": "t.py::test_a", "stats": stats, "extra_info": {}}
    data = {"datetime": stamp, "machine_info": {"perfgate": {"hardware_key": KEY}},
            "benchmarks": [benchmark]}  # fmt: skip
    for field, value in changes.items():
        if field in ("perfgate", "reduced_clock_rounds"):
            benchmark["extra_info"][field] = value
        else:
            data["machine_info"][field] = value
    return data


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"perfgate": "x"}, "extra_info.perfgate must be an object"),
        ({"perfgate": {"threshold": "10%"}}, "extra_info.perfgate.threshold"),
        ({"perfgate": {"ratios": ["speedup"]}}, "extra_info.perfgate.ratios"),
        ({"reduced_clock_rounds": "3"}, "extra_info.reduced_clock_rounds"),
    ],
)
def test_a_badly_typed_benchmark_field_is_one_error_naming_file_and_field(tmp_path, changes,
                                                                          field):  # fmt: skip
    path = write(tmp_path / "0001_x.json", run_json("2026-11-20T00:00:00", **changes))
    with pytest.raises(store.StoreError, match=field) as error:
        store.load(path)
    assert str(path) in str(error.value) and "t.py::test_a" in str(error.value)


def test_a_badly_typed_machine_info_or_datetime_is_one_error(tmp_path):
    bad_perfgate = run_json("2026-11-20T00:00:00")
    bad_perfgate["machine_info"]["perfgate"] = "x"
    with pytest.raises(store.StoreError, match="machine_info.perfgate must be an object"):
        store.load(write(tmp_path / "0001_x.json", bad_perfgate))
    with pytest.raises(store.StoreError, match="datetime 'yesterday' is not an ISO 8601"):
        store.load(write(tmp_path / "0002_x.json", run_json("yesterday")))


def test_perfgate_compare_names_a_badly_typed_field(tmp_path):
    good = write(tmp_path / "0001_a.json", run_json("2026-11-20T00:00:00"))
    bad = write(tmp_path / "0002_b.json", run_json("2026-11-21T00:00:00", perfgate="x"))
    err = io.StringIO()
    assert main(["compare", str(good), str(bad)], out=io.StringIO(), err=err) == 2
    (line,) = [x for x in err.getvalue().splitlines() if not x.startswith("reading runs")]
    assert "0002_b.json: t.py::test_a: extra_info.perfgate must be an object" in line


def test_datetimes_with_utc_offsets_are_compared_as_moments(tmp_path):
    key = tmp_path / KEY
    write(key / "m" / "0001_east.json", run_json("2026-11-20T10:00:00+05:00"))  # 05:00 UTC
    later = write(key / "m" / "0002_utc.json", run_json("2026-11-20T06:00:00+00:00"))
    write(key / "m" / "0003_naive.json", run_json("2026-11-20T04:00:00"))  # naive: UTC
    assert [r.path.name for r in store.saved_runs(key)] == [
        "0003_naive.json", "0001_east.json", "0002_utc.json"]  # fmt: skip
    assert baseline.choose(None, key)[0].path == later


def test_a_symlinked_machine_folder_is_read_and_saved_into(tmp_path):
    key, elsewhere = tmp_path / KEY, tmp_path / "elsewhere"
    write(elsewhere / "0001_old.json", run_json("2026-11-20T00:00:00"))
    key.mkdir()
    (key / "m").symlink_to(elsewhere, target_is_directory=True)
    (key / "loop").symlink_to(key, target_is_directory=True)  # a cycle is walked once
    assert [p.name for p in store.run_files(key)] == ["0001_old.json"]
    saved = store.save(key, "m", "new", run_json("2026-11-21T00:00:00"))
    assert saved.name == "0002_new.json" and (elsewhere / "0002_new.json").is_file()


def test_a_dangling_machine_folder_symlink_is_one_error(tmp_path):
    key = tmp_path / KEY
    key.mkdir()
    (key / "m").symlink_to(tmp_path / "gone")
    with pytest.raises(store.StoreError, match="is a symlink to .*gone, which is not a folder"):
        store.save(key, "m", "new", run_json("2026-11-21T00:00:00"))


# --- in a pytest session ----------------------------------------------------------------------


def _baseline(project: pytest.Pytester) -> Path:
    assert run(project, "--benchmark-save=base").ret == 0
    (path,) = saved_runs(project)
    return path


def test_a_run_from_the_future_is_not_the_baseline(bench_project):  # noqa: F811
    base = _baseline(bench_project)
    future = json.loads(base.read_text())
    future["datetime"] = "2099-01-01T00:00:00+00:00"
    future_path = base.with_name("0002_future.json")
    future_path.write_text(json.dumps(future))
    result = run(bench_project, "--perf-gate")
    output = result.stdout.str()
    assert result.ret == 0, output
    assert f"comparing with {base}" in output and "in the future" in output
    explicit = run(bench_project, "--benchmark-compare=0002")
    assert_one_line(explicit, pytest.ExitCode.USAGE_ERROR, "dated 2099-01-01T00:00:00+00:00, in")


def test_a_baseline_without_the_stats_pytest_benchmark_shows_is_refused_first(bench_project):  # noqa: F811
    base = _baseline(bench_project)
    data = json.loads(base.read_text())
    data["benchmarks"][0]["stats"] = {"data": data["benchmarks"][0]["stats"]["data"]}
    base.write_text(json.dumps(data))
    os.remove(bench_project.path / "ran")
    result = run(bench_project, "--benchmark-compare")
    assert_one_line(result, pytest.ExitCode.USAGE_ERROR, "stats.min is missing")
    assert not (bench_project.path / "ran").exists()


def test_the_gate_refuses_another_hardware_s_run(bench_project, tmp_path):  # noqa: F811
    base = _baseline(bench_project)
    other = json.loads(base.read_text())
    other["machine_info"]["perfgate"]["hardware_key"] = "Other-CPU-8cores"
    path = write(tmp_path / "Other-CPU-8cores" / "m" / "0001_other.json", other)
    result = run(bench_project, "--perf-gate", f"--benchmark-compare={path}")
    assert_one_line(result, GATE_NOT_RUN, "was recorded on Other-CPU-8cores")
    warned = run(bench_project, f"--benchmark-compare={path}")
    assert warned.ret == 0 and "warning: baseline" in warned.stdout.str()


def test_a_timed_session_s_baseline_is_a_timed_run_where_counted_runs_share_its_folder(
    bench_project, tmp_path
):
    """Without a baseline root, counted and timed runs share pytest-benchmark's own folder:
    a timed gate took a newer counted run as its baseline, and refused it as another machine's."""
    timed = write(tmp_path / "0001_timed.json", run_json("2026-11-01T00:00:00"))
    counted = run_json("2026-11-02T00:00:00")
    counted["benchmarks"][0]["extra_info"] = {"measure": "instructions", "instructions": 900}
    write(tmp_path / "0002_counted.json", counted)
    assert baseline.choose(None, tmp_path, counted=False)[0].path == timed
    assert baseline.choose(None, tmp_path, counted=True)[0].path.name == "0002_counted.json"
    assert baseline.choose(None, tmp_path)[0].path.name == "0002_counted.json"  # the newest
    (tmp_path / "0001_timed.json").unlink()
    with pytest.raises(store.NoSuchRun, match="no timed run"):
        baseline.choose(None, tmp_path, "no timed run", counted=False)

    base = _baseline(bench_project)  # through the plugin, in a folder of pytest-benchmark's
    shared = bench_project.path / ".benchmarks" / "machine"
    write(shared / base.name, json.loads(base.read_text()))
    later = json.loads(base.read_text())
    later["machine_info"]["perfgate"]["hardware_key"] = "callgrind-x86_64-AVX2"
    for case in later["benchmarks"]:
        case["extra_info"].update(measure="instructions", instructions=900)
    write(shared / "0002_counted.json", later)
    result = run(bench_project, "--perf-gate", f"--benchmark-storage=file://{shared}")
    assert result.ret == 0, result.stdout.str()
    assert f"comparing with {shared / base.name}" in result.stdout.str()


def test_benchmark_storage_naming_the_baseline_root_is_refused(bench_project):  # noqa: F811
    base = _baseline(bench_project)
    root = base.parents[2]
    for gate, status in (([], pytest.ExitCode.USAGE_ERROR), (["--perf-gate"], GATE_NOT_RUN)):
        result = run(bench_project, f"--benchmark-storage=file://{root}", *gate)
        assert_one_line(result, status, "is a baseline root")


def test_a_run_carries_its_format_and_older_ones_read_through_the_one_migration(tmp_path):
    from perfgate.fields import RUN_FORMAT

    older = write(tmp_path / "0001_old.json", run_json("2026-11-01T00:00:00"))  # no format
    assert store.load(older).format == 0 and store.load(older).benchmarks
    data = run_json("2026-11-01T00:00:00")
    data["machine_info"]["perfgate"]["format"] = RUN_FORMAT
    assert store.load(write(tmp_path / "0002_now.json", data)).format == RUN_FORMAT


@pytest.mark.parametrize("version", [99, "1", True])
def test_a_run_of_a_newer_or_unreadable_format_is_one_line(tmp_path, version):
    data = run_json("2026-11-01T00:00:00")
    data["machine_info"]["perfgate"]["format"] = version
    path = write(tmp_path / "0001_new.json", data)
    with pytest.raises(store.StoreError, match="written by a newer perfgate") as error:
        store.load(path)
    assert "\n" not in str(error.value) and "upgrade perfgate" in str(error.value)
