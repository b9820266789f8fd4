"""The baseline store: loading checks, newest by datetime, baseline sets, atomic exclusive saves."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from pathlib import Path

import pytest

from perfgate import store
from perfgate.store import baseline

KEY = "AMD-EPYC-2cores"


def run_json(stamp: str, torch_version: str = "2.13.0", data=(1e-3, 1.1e-3, 0.9e-3)) -> dict:
    stats = {"median": 1e-3, "data": list(data)}
    return {
        "datetime": stamp,
        "machine_info": {"perfgate": {"software": {"torch": torch_version}}},
        "commit_info": {"id": "abc"},
        "benchmarks": [{"name": "test_a", "fullname": "t.py::test_a", "stats": stats}],
    }


def write(folder: Path, name: str, data: dict | str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_newest_is_by_recorded_datetime_across_subfolders(tmp_path):
    key = tmp_path / KEY
    write(key / "Linux-CPython-3.11-64bit", "0006_old.json", run_json("2026-11-20T00:00:00"))
    newer = write(
        key / "Linux-CPython-3.12-64bit", "0001_new.json", run_json("2026-11-22T00:00:00")
    )
    assert baseline.choose(None, key)[0].path == newer


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"benchmarks": [', "not valid JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        ('{"machine_info": {}}', "no 'benchmarks' list"),
        ('{"benchmarks": [{}]}', "benchmarks[0] has no name"),
        (
            '{"benchmarks": [{"name": "a", "fullname": "a", "stats": {"data": [1, -2]}}]}',
            "stats.data must be a list of positive seconds",
        ),
        (
            '{"benchmarks": [{"name": "a", "fullname": "a", "stats": {"data": []}}]}',
            "neither per-round data nor a positive stats.median",
        ),
    ],
)
def test_a_broken_run_is_one_error_naming_the_file(tmp_path, content, says):
    path = write(tmp_path, "0001_x.json", content)
    with pytest.raises(store.StoreError, match=re.escape(says)) as error:
        store.load(path)
    assert str(path) in str(error.value)


def test_a_run_saved_without_per_round_data_loads_with_its_median(tmp_path):
    data = run_json("2026-11-22T00:00:00", data=())
    run = store.load(write(tmp_path, "0001_x.json", data))
    benchmark = run.benchmarks["t.py::test_a"]
    assert benchmark.samples == () and benchmark.median == 1e-3
    assert run.without_samples() == [benchmark]


def test_baseline_set_is_the_same_name_in_a_row_in_one_environment(tmp_path):
    key = tmp_path / KEY
    folder = key / "m"
    write(folder, "0001_cpu.json", run_json("2026-11-20T01:00:00"))
    write(folder, "0002_quiet.json", run_json("2026-11-20T02:00:00"))
    write(folder, "0003_cpu.json", run_json("2026-11-20T03:00:00", torch_version="2.12"))
    write(folder, "0004_cpu.json", run_json("2026-11-20T04:00:00"))
    write(folder, "0005_cpu.json", run_json("2026-11-20T05:00:00"))
    runs = store.saved_runs(key)
    members = baseline.members(runs[-1], runs)
    assert [r.path.name for r in members] == ["0004_cpu.json", "0005_cpu.json"]
    older = baseline.members(runs[2], runs)  # another torch: a set of its own
    assert [r.path.name for r in older] == ["0003_cpu.json"]


def test_a_set_holds_at_most_the_newest_runs(tmp_path):
    key = tmp_path / KEY
    for i in range(1, baseline.MAX_SET_RUNS + 3):
        write(key / "m", f"{i:04d}_cpu.json", run_json(f"2026-11-20T{i:02d}:00:00"))
    runs = store.saved_runs(key)
    assert baseline.members(runs[-1], runs) == runs[-baseline.MAX_SET_RUNS :]


def test_resolve_by_number_name_or_path_and_says_what_exists(tmp_path):
    key = tmp_path / KEY
    first = write(key / "m", "0001_h100-full.json", run_json("2026-11-20T00:00:00"))
    write(key / "m", "0002_h100-quick.json", run_json("2026-11-21T00:00:00"))
    assert store.resolve("1", key) == first
    assert store.resolve("full", key) == first
    assert store.resolve(str(first), key) == first
    with pytest.raises(store.NoSuchRun, match="no run '9999'.*0001_h100-full.json"):
        store.resolve("9999", key)
    with pytest.raises(store.StoreError, match="names several runs"):
        store.resolve("h100", key)


def test_no_runs_names_the_keys_that_have_some(tmp_path):
    write(tmp_path / "NVIDIA-H100" / "m", "0001_a.json", run_json("2026-11-20T00:00:00"))
    with pytest.raises(store.NoSuchRun, match=r"\(AMD-EPYC-2cores\).*NVIDIA-H100"):
        store.resolve("1", tmp_path / KEY)


def test_save_takes_the_next_number_across_the_key_and_never_overwrites(tmp_path):
    key = tmp_path / KEY
    existing = write(key / "Linux-CPython-3.11-64bit", "0007_old.json", "{}")
    saved = store.save(key, "Linux-CPython-3.12-64bit", "new", run_json("2026-11-22T00:00:00"))
    assert saved.name == "0008_new.json"
    assert existing.read_text() == "{}"
    assert store.load(saved).datetime == "2026-11-22T00:00:00"
    assert not list(key.rglob(".saving-*")) and not list(key.glob(".claim-*"))


def _save_many(arguments) -> list[str]:
    key, name = arguments
    data = run_json("2026-11-22T00:00:00")
    return [store.save(Path(key), "m", name, data).name for _ in range(5)]


def test_concurrent_saves_in_several_processes_never_share_a_number(tmp_path):
    key = tmp_path / KEY
    jobs = [(str(key), f"proc{i}") for i in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        names = [name for names in pool.map(_save_many, jobs) for name in names]
    numbers = sorted(store.number_of(Path(name)) for name in names)
    assert numbers == list(range(1, 21)), names
    assert sorted(p.name for p in key.rglob("*.json")) == sorted(names)


def test_a_stale_claim_left_by_a_crash_is_forgotten(tmp_path):
    key = tmp_path / KEY
    key.mkdir(parents=True)
    claim = key / ".claim-0001"
    claim.write_text("")  # an ownerless claim (of an older perfgate), two minutes old
    os.utime(claim, (claim.stat().st_mtime - 120,) * 2)
    saved = store.save(key, "m", "after-crash", run_json("2026-11-22T00:00:00"))
    assert saved.name == "0001_after-crash.json"


def test_a_sessions_results_file_is_read_and_checked_or_named(tmp_path):
    results = tmp_path / "a-0.json"
    store.write_json(results, run_json("2026-11-22T00:00:00"))
    assert store.read_results(results).datetime == "2026-11-22T00:00:00"
    with (tmp_path / "b-0.json").open("wb") as file:  # pytest-benchmark < 5.3 opens it itself
        store.write_json(file, run_json("2026-11-23T00:00:00"))
    assert store.read_results(tmp_path / "b-0.json").datetime == "2026-11-23T00:00:00"
    results.write_text('{"benchmarks": [')
    with pytest.raises(store.StoreError, match=r"a-0\.json: "):
        store.read_results(results)
    with pytest.raises(store.StoreError, match="cannot read"):
        store.read_results(tmp_path / "missing.json")


# --- symlinks in the store -------------------------------------------------------------------
def test_a_run_linked_in_from_elsewhere_is_named_by_its_store_entry(tmp_path):
    folder = tmp_path / KEY / "m"
    write(folder, "0001_a.json", run_json("2026-11-20T10:00:00"))
    elsewhere = write(tmp_path / "elsewhere", "run.json", run_json("2026-11-21T10:00:00"))
    (folder / "0002_b.json").symlink_to(elsewhere)
    runs = store.saved_runs(tmp_path / KEY)
    assert [run.path.name for run in runs] == ["0001_a.json", "0002_b.json"]
    assert baseline.choose(None, tmp_path / KEY)[0].path == (folder / "0002_b.json").absolute()
    assert store.save(tmp_path / KEY, "m", "next", run_json("2026-11-22T10:00:00")).name == (
        "0003_next.json"
    )


@pytest.mark.parametrize("target", ["self", "outside", "nothing"])
def test_a_store_entry_that_links_to_a_bad_file_is_named_by_the_entry(tmp_path, target):
    folder = tmp_path / KEY / "m"
    entry = folder / "0001_bad.json"
    folder.mkdir(parents=True)
    outside = write(tmp_path / "etc", "passwd", "root:x:0:0:root:/root:/bin/bash\n")
    entry.symlink_to({"self": entry, "outside": outside, "nothing": tmp_path / "gone"}[target])
    with pytest.raises(store.StoreError) as error:
        store.saved_runs(tmp_path / KEY)
    assert f"git checkout -- {entry}`" in str(error.value) and "passwd" not in str(error.value)


def test_a_store_folder_that_links_to_itself_is_one_line(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert "Too many levels of symbolic links" in store.folder_problem(tmp_path / "loop")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    assert "is a symlink to nothing" in store.folder_problem(tmp_path / "gone")
    assert store.folder_problem(tmp_path / "missing") is None
    assert store.folder_problem(tmp_path) is None
    assert store.run_files(tmp_path / "loop") == [] and store.hardware_keys(tmp_path) == []
