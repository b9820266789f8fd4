"""Which saved runs form a baseline set: the newest and the runs saved just before it under the
same name, in the same environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.baselines import MAX_SET_RUNS, baseline_set, run_name


def save(folder: Path, file_name: str, torch_version: str = "2.13.0") -> Path:
    path = folder / file_name
    software = {"torch": torch_version}
    path.write_text(json.dumps({"benchmarks": [], "machine_info": {"software": software}}))
    return path


def torch_version(run: dict) -> str:
    return run["machine_info"]["software"]["torch"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    machine = tmp_path / "Linux-CPython-3.11-64bit"
    machine.mkdir()
    return machine


def names(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_runs_saved_in_a_row_under_one_name_form_a_set(folder):
    save(folder, "0001_cpu-default.json")
    save(folder, "0002_quiet.json")
    save(folder, "0003_cpu-default.json")
    newest = save(folder, "0004_cpu-default.json")
    assert names(baseline_set(newest, torch_version)) == [
        "0003_cpu-default.json",
        "0004_cpu-default.json",
    ]  # 0002 has another name and ends the set: 0001 is not in it


def test_another_environment_ends_the_set(folder):
    save(folder, "0001_nightly.json", torch_version="2.12.0")
    newest = save(folder, "0002_nightly.json")
    assert names(baseline_set(newest, torch_version)) == ["0002_nightly.json"]


def test_a_set_holds_at_most_the_newest_runs(folder):
    paths = [save(folder, f"{i:04d}_cpu.json") for i in range(1, MAX_SET_RUNS + 3)]
    assert baseline_set(paths[-1], torch_version) == paths[-MAX_SET_RUNS:]


def test_an_older_run_named_explicitly_takes_its_own_set(folder):
    first = save(folder, "0001_cpu.json")
    second = save(folder, "0002_cpu.json")
    save(folder, "0003_cpu.json")
    assert baseline_set(second, torch_version) == [first, second]


def test_run_name_is_what_follows_the_number():
    assert run_name(Path("0012_cpu-default_quiet.json")) == "cpu-default_quiet"
