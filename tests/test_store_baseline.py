"""The one baseline choice (``perfgate.store.baseline``): which run of a hardware folder is the
baseline and which runs form its set, the same for the pytest plugin and the ``perfgate`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import entry, perfgate, rounds, run_json

from perfgate import store
from perfgate.store import baseline

KEY = "TEST-KEY"
TABLE = {"min": 1e-3, "max": 2e-3, "mean": 1.5e-3, "stddev": 1e-4, "iqr": 1e-4, "ops": 600.0,
         "rounds": 30, "iterations": 1}  # fmt: skip


def save(folder: Path, number: int, name: str, day: str, torch: str = "2.13.0") -> Path:
    benchmark = entry("t.py::test_a", rounds(number))
    benchmark["stats"].update(TABLE)
    data = run_json(benchmark, datetime=f"{day}T10:00:00+00:00", software={"torch": torch})
    path = folder / "machine" / f"{number:04d}_{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """0001 other, 0002-0004 base (0002 in another environment), 0005 base in the future."""
    key = tmp_path / "baselines" / KEY
    save(key, 1, "other", "2026-11-01")
    save(key, 2, "base", "2026-11-02", torch="2.12.0")
    save(key, 3, "base", "2026-11-03")
    save(key, 4, "base", "2026-11-04")
    save(key, 5, "base", "2999-01-01")
    return key


def names(runs) -> list[str]:
    return [run.path.name for run in runs]


def test_the_newest_run_not_dated_in_the_future_is_the_baseline(folder):
    run, members = baseline.choose(None, folder)
    assert run.path.name == "0004_base.json"
    assert names(members) == ["0003_base.json", "0004_base.json"]  # 0002: another torch


def test_a_named_run_is_the_baseline_with_the_runs_saved_just_before_it(folder):
    run, members = baseline.choose("0003", folder)
    assert names(members) == ["0003_base.json"] and members[-1] is run
    assert names(baseline.choose("other", folder)[1]) == ["0001_other.json"]


def test_a_run_dated_in_the_future_is_refused_by_name(folder):
    with pytest.raises(store.StoreError, match="in the future"):
        baseline.choose("0005", folder)


def test_an_empty_folder_says_what_to_do(tmp_path):
    with pytest.raises(store.NoSuchRun, match="no baseline for this hardware"):
        baseline.choose(None, tmp_path / KEY)
    with pytest.raises(store.NoSuchRun, match="say this"):
        baseline.choose(True, tmp_path / KEY, "say this")


def test_a_run_outside_a_hardware_folder_is_a_set_of_one(folder, tmp_path):
    loose = tmp_path / "loose.json"
    loose.write_text((folder / "machine" / "0004_base.json").read_text())
    run, members = baseline.choose(str(loose), folder)
    assert members == [run] and run.path == loose.resolve()
    assert baseline.set_of(store.load(loose)) == [store.load(loose)]


def test_set_of_a_loaded_run_is_the_set_choose_gives(folder):
    for wanted in ("0001", "0003", "0004", None):
        run, members = baseline.choose(wanted, folder)
        assert baseline.set_of(run) == members


def test_a_set_holds_at_most_max_set_runs(tmp_path):
    key = tmp_path / KEY
    for number in range(1, baseline.MAX_SET_RUNS + 3):
        save(key, number, "base", f"2026-11-{number:02d}")
    assert len(baseline.choose(None, key)[1]) == baseline.MAX_SET_RUNS


def test_the_plugin_and_the_cli_choose_the_same_run_and_set(folder, pytester, monkeypatch):
    """Given the same folder, a pytest session's --benchmark-compare and ``perfgate compare``
    name the same baseline and the same set."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_a="def test_a(benchmark):\n    benchmark(sum, [1, 2])\n")
    root = folder.parent
    for wanted in ("", "=0004", "=0001"):
        session = pytester.runpytest_subprocess(
            "-p", "perfgate.plugin", "-p", "no:cacheprovider", "-o", "perfgate=true",
            f"--benchmark-storage=file://{folder}", f"--benchmark-compare{wanted}",
        )  # fmt: skip
        said = [line for line in session.outlines if "perfgate: comparing with" in line]
        assert session.ret == 0 and len(said) == 1, session.outlines
        run, members = baseline.choose(wanted.lstrip("=") or None, folder)
        assert str(run.path) in said[0]
        assert ("a set with" in said[0]) == (len(members) > 1)
        assert all(m.path.name in said[0] for m in members)
        argv = ["compare", run.path.name[:4], "0001" if run.path.name[:4] != "0001" else "0004",
                "--baselines", str(root), "--hardware", KEY]  # fmt: skip
        status, out, err = perfgate(*argv)
        assert status == 0, err
        earlier = ", ".join(names(members[:-1]))
        assert (f"as a baseline set with {earlier} (" in out) == (len(members) > 1)


def test_the_cli_never_takes_a_run_dated_in_the_future_as_the_newest(folder):
    where = ["--baselines", str(folder.parent), "--hardware", KEY]
    status, _, err = perfgate("compare", *where, "--json")
    assert status == 0, err
    status, text, _ = perfgate("compare", *where)
    assert status == 0 and "0003_base.json" in text and "0004_base.json" in text
    assert "0005" not in text


@pytest.mark.parametrize(
    "days, said",
    [(["2026-01-01T10:00:00", "2026-01-01T10:03:00"], "saved over 3 min"),
     (["2026-01-01T10:00:00", "2026-01-01T16:00:00", "2026-01-01T20:30:00"], "saved over 10 h"),
     (["2026-01-01T10:00:00", "2026-01-09T10:00:00"], "saved over 8 days")],
)  # fmt: skip
def test_the_gate_says_how_far_apart_a_sets_runs_were_saved(days, said):
    """Runs saved minutes apart see one moment of a shared runner; one per CI run sees how its
    sessions differ (docs/gate-validation/cpu-shared-runner/session13.md): the gate says which."""
    from perfgate.benchmark import Run
    from perfgate.session.baseline import BaselineChoice

    runs = [Run(Path(f"{i:04d}_ci.json"), day, {}, {}, {}) for i, day in enumerate(days, 1)]
    choice = BaselineChoice(Path("."), gate=True, baseline=runs[-1], members=runs)
    assert "(a set with 0001_ci.json" in choice.label and f"{said}: each benchmark" in choice.label
    single = BaselineChoice(Path("."), gate=True, baseline=runs[0], members=runs[:1])
    assert single.label == "0001_ci.json"


def test_a_set_with_an_undated_run_says_nothing_of_its_span():
    from perfgate.benchmark import Run
    from perfgate.session.baseline import BaselineChoice

    runs = [
        Run(Path("0001_ci.json"), "", {}, {}, {}),
        Run(Path("0002_ci.json"), "2026-01-01T10:00:00", {}, {}, {}),
    ]
    label = BaselineChoice(Path("."), gate=True, baseline=runs[-1], members=runs).label
    assert "(a set with 0001_ci.json: each benchmark" in label and "saved over" not in label
