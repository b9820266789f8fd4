"""``perfgate dashboard`` and the steps in ``perfgate history``, on synthetic histories."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys

import pytest
from helpers import FLAT, STEPPED, full_disk, perfgate, write_history
from helpers import HISTORY_KEY as KEY

from perfgate.format import markdown
from perfgate.report.dashboard import page_path

pytest.importorskip(
    "plotly", reason="the dashboard needs plotly: pip install 'perfgate[dashboard]'"
)


STEPPED_PAGE = page_path(KEY, f"perf_tests/test_synthetic.py::{STEPPED}")
FLAT_PAGE = page_path(KEY, f"perf_tests/test_synthetic.py::{FLAT}")


@pytest.fixture
def history(tmp_path):
    write_history(tmp_path / "baselines", runs=24, step_at=12)
    return tmp_path / "baselines"


def test_dashboard_has_an_index_linking_one_page_per_benchmark(history, tmp_path):
    site = tmp_path / "site"
    status, _, err = perfgate("dashboard", "--out", str(site), "--baselines", str(history))
    assert status == 0, err
    index = (site / "index.html").read_text()
    links = re.findall(r"href='([^']+\.html)'", index)
    assert sorted(set(links)) == sorted([FLAT_PAGE, STEPPED_PAGE])
    assert "<h2>Synthetic-CPU-2cores</h2>" in index
    assert "<h3>history</h3>" in index and "<h3>synthetic</h3>" not in index  # declared family
    assert "Open slowdowns" in index and "0013_nightly.json" in index
    page = (site / STEPPED_PAGE).read_text()
    assert "src='../plotly.min.js'" in page
    assert "step +" in page and "env: torch 2.13.0 -&gt; 2.14.0" in page
    assert "fraction of the copy roofline" in page  # the declared ratio beside the times
    assert "speedup_undeclared" not in page  # what the test did not declare is not drawn
    assert "no significant step" in (site / FLAT_PAGE).read_text()
    assert len(list(site.rglob("plotly*.js"))) == 1


def test_a_run_file_given_joins_its_hardware_and_its_new_step_is_printed(tmp_path):
    folder = write_history(tmp_path / "baselines", runs=14, step_at=11)
    night = tmp_path / "nightly.json"
    shutil.move(folder / "0014_nightly.json", night)
    site = tmp_path / "site"
    arguments = ["--out", str(site), "--baselines", str(tmp_path / "baselines")]
    status, out, _ = perfgate("dashboard", *arguments)
    assert status == 0 and out == ""  # 2 slow runs: no step yet, nothing to summarize
    summary = tmp_path / "summary.md"
    summary.write_text("# nightly\n")
    status, out, err = perfgate("dashboard", *arguments, str(night), "--link-base", "https://x/",
                                "--summary", str(summary))  # fmt: skip
    assert status == 0, err
    assert out.startswith("New steps in the benchmark history")
    assert summary.read_text() == "# nightly\n" + out  # appended, nothing lost
    assert f"(https://x/{STEPPED_PAGE})" in out
    assert "at 0012_nightly.json" in out
    assert "nightly.json" in (site / STEPPED_PAGE).read_text()


def test_a_confirmed_regression_of_the_gate_is_linked_with_its_trend(history, tmp_path):
    name = f"perf_tests/test_synthetic.py::{STEPPED}"
    gate = tmp_path / "gate.json"
    row = {"message": "slower", "change_percent": 4.2}
    rows = [{"name": name, "verdict": "regression", **row}, {"name": "o", "verdict": "unchanged"}]
    gate.write_text(json.dumps(rows))
    night = next(history.rglob("0024_nightly.json"))
    status, out, err = perfgate("dashboard", "--out", str(tmp_path / "s"), "--baselines",
                                str(history), str(night), "--gate", str(gate),
                                "--link-base", "https://pages/")  # fmt: skip
    assert status == 0, err
    first, blank, line = out.splitlines()[:3]
    assert first.startswith("Confirmed regressions") and blank == ""
    assert line.startswith(f"- [{markdown(name)}](https://pages/{STEPPED_PAGE})")
    assert "+4.2 %" in line and "over 20 runs" in line
    trend = re.search(r"`([▁▂▃▄▅▆▇█]+)`", line).group(1)
    assert len(trend) == 20  # runs 5..24 of a history that stepped up at run 13
    assert set(trend[:8]) <= set("▁▂▃") and set(trend[8:]) <= set("▆▇█")
    assert "[o]" not in out


def test_a_gate_summary_that_cannot_be_read_is_one_line(history, tmp_path):
    gate = tmp_path / "gate.md"
    gate.write_text("# perfgate gate\n")
    status, _, err = perfgate("dashboard", "--out", str(tmp_path / "s"), "--baselines",
                              str(history), "--gate", str(gate))  # fmt: skip
    assert status == 2 and err.count("\n") == 1 and "not a perfgate gate summary" in err
    assert not (tmp_path / "s").exists()


def test_the_sparkline_spans_the_smallest_to_the_largest_value():
    from perfgate.report.dashboard import sparkline

    assert sparkline([1, 1, 2]) == "▁▁█" and sparkline([3, 3]) == "▁▁"


def test_no_new_step_is_said_in_one_line(history, tmp_path):
    night = tmp_path / "nightly.json"
    run = json.loads(next(history.rglob("0024_nightly.json")).read_text())
    run["datetime"] = "2026-12-01T00:00:00+00:00"
    night.write_text(json.dumps(run))
    status, out, _ = perfgate("dashboard", "--out", str(tmp_path / "s"), "--baselines",
                              str(history), str(night))  # fmt: skip
    assert (status, out) == (0, "No new step in the benchmark history.\n")


def test_rebuilding_in_place_works_but_a_foreign_folder_is_left_alone(history, tmp_path):
    site = tmp_path / "site"
    assert perfgate("dashboard", "--out", str(site), "--baselines", str(history))[0] == 0
    assert perfgate("dashboard", "--out", str(site), "--baselines", str(history))[0] == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    status, _, err = perfgate("dashboard", "--out", str(mine), "--baselines", str(history))
    assert status == 2
    assert err.count("\n") == 1 and "not a perfgate dashboard" in err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    "problem, expected",
    [("empty", "no saved runs under"), ("corrupt", "not valid JSON"), ("missing", "cannot read")],
)
def test_errors_are_one_line_with_status_2(tmp_path, problem, expected):
    root = tmp_path / "baselines"
    root.mkdir()
    runs = []
    if problem == "corrupt":
        (tmp_path / "bad.json").write_text("{")
        runs = [str(tmp_path / "bad.json")]
    if problem == "missing":
        runs = [str(tmp_path / "absent.json")]
    status, _, err = perfgate("dashboard", "--out", str(tmp_path / "s"), "--baselines",
                              str(root), *runs)  # fmt: skip
    assert status == 2 and expected in err
    assert err.startswith("perfgate dashboard: error:") and err.count("\n") == 1


def test_without_plotly_the_error_says_how_to_install_it(history, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly.offline", None)
    status, _, err = perfgate("dashboard", "--out", str(tmp_path / "s"), "--baselines",
                              str(history))  # fmt: skip
    assert status == 2 and "pip install 'perfgate[dashboard]'" in err


def test_history_prints_the_steps_of_each_benchmark(history):
    where = ["--baselines", str(history), "--hardware", KEY, "--no-plots"]
    status, out, _ = perfgate("history", STEPPED, *where)
    assert status == 0
    assert re.search(r"^steps \(PELT.*\):\n  \+\d+\.\d % \(slower\) at 0013_nightly\.json", out,
                     re.M)  # fmt: skip
    status, out, _ = perfgate("history", "cpu-flat", *where)
    assert "steps: none found in 24 runs" in out


def test_history_of_few_runs_says_why_no_step_can_be_found(tmp_path):
    write_history(tmp_path, runs=4, step_at=2)
    status, out, _ = perfgate("history", STEPPED, "--baselines", str(tmp_path), "--hardware", KEY,
                              "--no-plots")  # fmt: skip
    assert "steps: none can be found in 4 runs (a step needs 3 on each side)" in out


def test_a_saved_run_given_again_is_not_counted_twice(history, tmp_path):
    saved = next(history.rglob("0024_nightly.json"))
    site = tmp_path / "site"
    status, _, _ = perfgate("dashboard", "--out", str(site), "--baselines", str(history),
                            str(saved), str(saved))  # fmt: skip
    assert status == 0
    assert ", 24 runs</p>" in (site / STEPPED_PAGE).read_text()


def test_runs_given_join_the_history_in_the_order_they_were_recorded(tmp_path):
    """Older runs given as files (an A/A series) go before a newer saved run, not after it."""
    from perfgate.cli.history_runs import runs_by_hardware

    folder = write_history(tmp_path / "baselines", runs=6, step_at=99)
    older = []
    for path in sorted(folder.glob("*.json"))[:4]:  # runs 1-4 leave the store, as files
        older.append(tmp_path / path.name)
        shutil.move(path, older[-1])
    (runs,) = runs_by_hardware(tmp_path / "baselines", older).values()
    assert [run.path.name[:4] for run in runs] == ["0001", "0002", "0003", "0004", "0005", "0006"]


def test_a_benchmark_in_no_group_shows_an_empty_group_not_none(tmp_path):
    folder = write_history(tmp_path / "baselines", runs=6, step_at=3)
    for path in folder.glob("*.json"):  # pytest-benchmark's group of a test without one
        run = json.loads(path.read_text())
        for benchmark in run["benchmarks"]:
            benchmark["group"] = None
        path.write_text(json.dumps(run))
    site = tmp_path / "site"
    arguments = ["--out", str(site), "--baselines", str(tmp_path / "baselines")]
    status, _, err = perfgate("dashboard", *arguments)
    assert status == 0, err
    index = (site / "index.html").read_text()
    assert "None" not in index and "<td></td>" in index
    page = (site / STEPPED_PAGE).read_text()
    assert "None" not in page and "group" not in page.split("<h2>")[0].lower().split("</h1>")[1]


def test_another_projects_benchmarks_folder_is_read_without_baselines(tmp_path, monkeypatch):
    folder = write_history(tmp_path / ".benchmarks", runs=6, step_at=3)
    monkeypatch.chdir(tmp_path)  # pytest-benchmark's storage, and no baselines/ folder
    status, _, err = perfgate("dashboard", "--out", str(tmp_path / "site"))
    assert status == 0, err
    index = (tmp_path / "site" / "index.html").read_text()
    assert f"<h2>{folder.parent.name}</h2>" in index and "test_kernel[cpu-stepped]" in index


def test_a_page_name_fits_a_file_name_however_long_the_benchmark_name():
    long_name = "perf_tests/test_x.py::test_k[" + "a" * 1000 + "]"
    name = page_path("..", long_name).split("/")
    assert name[0] == "unknown" and len(name[1].encode()) < 255  # never a folder above --out


def test_the_site_folder_follows_the_umask(history, tmp_path):
    old = os.umask(0o022)
    try:
        status, _, err = perfgate("dashboard", "--out", str(tmp_path / "site"), "--baselines",
                                  str(history))  # fmt: skip
    finally:
        os.umask(old)
    assert status == 0, err
    assert (tmp_path / "site").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("key", ["..", "../../elsewhere", "/tmp/elsewhere"])
def test_a_run_whose_hardware_key_is_no_folder_name_writes_nothing_outside_out(
    history, tmp_path, key
):
    night = next(history.rglob("0024_nightly.json"))
    data = json.loads(night.read_text())
    data["machine_info"]["perfgate"]["hardware_key"] = key
    given = tmp_path / "work" / "night.json"
    given.parent.mkdir()
    given.write_text(json.dumps(data))
    site = tmp_path / "work" / "out" / "site"
    status, _, err = perfgate("dashboard", "--out", str(site), "--baselines", str(history),
                              str(given))  # fmt: skip
    assert status == 2 and f"hardware_key {key!r} cannot be a folder name" in err, err
    assert not list(tmp_path.rglob("*.html"))


def test_pages_of_one_test_name_in_two_modules_have_their_own_titles(tmp_path):
    folder = write_history(tmp_path / "baselines", runs=6, step_at=3)
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        twin = json.loads(json.dumps(data["benchmarks"][0]))
        twin["fullname"] = twin["fullname"].replace("test_synthetic.py", "test_other.py")
        data["benchmarks"].append(twin)
        path.write_text(json.dumps(data))
    site = tmp_path / "site"
    status, _, err = perfgate(
        "dashboard", "--out", str(site), "--baselines", str(tmp_path / "baselines")
    )
    assert status == 0, err
    pages = [p for p in site.rglob("*.html") if p.name != "index.html"]
    titles = {re.search("<title>(.*)</title>", p.read_text()).group(1) for p in pages}
    assert len(pages) == 3 and len(titles) == 3


# --- a full disk: one line, nothing half-written -------------------------------------------------
@pytest.mark.parametrize("writes", [0, 1, 2, 3])  # the marker, plotly, a page, the other page
def test_a_full_disk_is_one_line_and_leaves_the_site_as_it_was(history, tmp_path, monkeypatch,
                                                               writes):  # fmt: skip
    site = tmp_path / "out" / "site"
    assert perfgate("dashboard", "--out", str(site), "--baselines", str(history))[0] == 0
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    full_disk(monkeypatch, tmp_path / "out", writes)
    status, out, err = perfgate("dashboard", "--out", str(site), "--baselines", str(history))
    line = err.splitlines()[-1]  # after the progress lines
    assert status == 2 and "Traceback" not in err, err
    assert line.startswith("perfgate dashboard: error: could not write the dashboard: No space")
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["site"]  # no .site.building-*


def test_a_full_disk_under_the_summary_is_one_line_and_appends_nothing(tmp_path, monkeypatch):
    folder = write_history(tmp_path / "baselines", runs=14, step_at=11)
    night = tmp_path / "nightly.json"
    shutil.move(folder / "0014_nightly.json", night)
    summary = tmp_path / "job" / "summary.md"
    summary.parent.mkdir()
    summary.write_text("# nightly\n")
    full_disk(monkeypatch, summary.parent)
    status, out, err = perfgate("dashboard", "--out", str(tmp_path / "site"), "--baselines",
                                str(tmp_path / "baselines"), str(night), "--summary",
                                str(summary))  # fmt: skip
    assert status == 2 and "Traceback" not in err
    assert "perfgate dashboard: error: could not write --summary: No space" in err.splitlines()[-1]
    assert summary.read_text() == "# nightly\n"  # cut back: no half of the new lines
    assert (tmp_path / "site" / "index.html").is_file()
