"""The pull-request comment (tools/pr_comment.py) built from what the gate writes: gate.json and
gate.md made by the verdict's own writers (judge, summary) from fixture runs, the committed
callgrind baseline against copies of it with one case's counts changed."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import pr_comment  # noqa: E402

from perfgate import store  # noqa: E402
from perfgate.verdict import summary  # noqa: E402
from perfgate.verdict.judge import judge  # noqa: E402
from perfgate.verdict.rows import from_json  # noqa: E402

BASELINE = next((ROOT / "baselines" / "callgrind-x86_64-AVX2").rglob("0005_*.json"))
CASE = "perf_tests/test_host_overhead.py::test_host_overhead[sdpa-1x4x16x32]"
ADDED = "???:added_check(char const*) [libexample.so]"


def changed(scale: float, added_function: int = 0) -> dict:
    """The baseline's run with CASE's instructions per call scaled, and a function added."""
    run = copy.deepcopy(json.loads(BASELINE.read_text()))
    run["datetime"] = "2026-11-25T00:00:00+00:00"
    for entry in run["benchmarks"]:
        if entry["fullname"] == CASE:
            info = entry["extra_info"]
            info["instructions"] = round(info["instructions"] * scale)
            info["instructions_by_layout"] = [
                round(n * scale) for n in info["instructions_by_layout"]
            ]
            entry["stats"]["data"] = [value * scale for value in entry["stats"]["data"]]
            if added_function:
                info["top_functions"] = [[ADDED, added_function], *info["top_functions"]]
    return run


def gate_outputs(tmp_path: Path, run: dict) -> tuple[Path, list[dict]]:
    """gate.json and gate.md as the gate writes them, for ``run`` against the baseline."""
    path = tmp_path / "current.json"
    path.write_text(json.dumps(run))
    baseline = store.load(BASELINE)
    results = judge([baseline], store.load(path))
    (tmp_path / "gate.md").write_text(summary.markdown(results, [], str(BASELINE.name)))
    rows = summary.as_json(results)
    (tmp_path / "gate.json").write_text(json.dumps(rows, indent=2))
    return tmp_path / "gate.json", rows


def body(tmp_path: Path, run: dict) -> str:
    gate_json, _ = gate_outputs(tmp_path, run)
    markdown = (tmp_path / "gate.md").read_text()
    rows = from_json(json.loads(gate_json.read_text()))
    return pr_comment.comment_body(rows, markdown, "a" * 40, "b" * 40, "https://ci/run/1")


def test_a_regression_fails_and_shows_the_functions_that_changed(tmp_path):
    added = 5000  # about 5 % of the case's own count: past its 0.5 % tolerance
    text = body(tmp_path, changed(1.05, added_function=added))
    assert text.startswith(pr_comment.MARKER + "\n")
    assert "a confirmed regression** (1 regression, 5 unchanged): this check fails." in text
    row = next(line for line in text.splitlines() if "sdpa\\-1x4x16x32" in line)
    assert "| regression |" in row and "tolerance 0.50%" in row
    functions = text.split("#### Functions that changed", 1)[1]
    assert "added_check(char const*)" in functions  # inside a code block: shown as written
    assert f"<summary>{CASE}</summary>" in functions  # HTML: no markdown escapes there
    assert "<summary>5 unchanged</summary>" in text
    assert "`aaaaaaaaaaaa`" in text and "`bbbbbbbbbbbb`" in text
    assert "[The job, its log and the gate's files](https://ci/run/1)" in text


def test_an_improvement_passes_and_lists_the_case(tmp_path):
    text = body(tmp_path, changed(0.95))
    assert "no regression** (1 improvement, 5 unchanged)." in text
    row = next(line for line in text.splitlines() if "sdpa\\-1x4x16x32" in line)
    assert "| improvement |" in row
    assert "Functions that changed" not in text


def test_an_unchanged_run_passes_with_every_case_folded(tmp_path):
    text = body(tmp_path, changed(1.0))
    assert "no regression** (6 unchanged)." in text
    table = text.split("<summary>6 unchanged</summary>", 1)[1]
    assert table.count("| unchanged |") == 6
    assert "Functions that changed" not in text


def test_the_command_writes_the_body_from_the_gates_files(tmp_path, capsys):
    gate_json, _ = gate_outputs(tmp_path, changed(1.05, added_function=5000))
    assert pr_comment.main([str(gate_json), "--base", "c" * 40, "--head", "d" * 40]) == 0
    out = capsys.readouterr().out
    assert out.startswith(pr_comment.MARKER) and "added_check" in out


def test_a_gate_that_wrote_nothing_says_so(tmp_path, capsys):
    assert pr_comment.main([str(tmp_path / "gate.json"), "--run-url", "https://ci/run/2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(pr_comment.MARKER) and "the gate did not run" in out
    assert "https://ci/run/2" in out


def test_a_broken_gate_json_is_one_line(tmp_path, capsys):
    (tmp_path / "gate.json").write_text("[{")
    assert pr_comment.main([str(tmp_path / "gate.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    (tmp_path / "gate.json").write_text('{"format": 99, "rows": []}')  # a newer perfgate's
    assert pr_comment.main([str(tmp_path / "gate.json")]) == 2
    assert "upgrade perfgate" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    ["t.py::test[<img src=x onerror=alert(1)>]", "t.py::test[[a link](https://x)]", "t.py::**x**"],
)
def test_text_from_the_run_is_never_markup(name):
    rows = from_json([{"name": name, "verdict": "regression", "message": "<b>slower</b> | `x`"}])
    text = pr_comment.comment_body(rows, "", "", "", "")
    table_row = next(line for line in text.splitlines() if "regression |" in line)
    assert "<img" not in table_row and "<b>" not in table_row
    assert "](" not in table_row.replace("\\](", "") and "**x**" not in table_row
    assert table_row.count(" | ") == 3  # the message's pipe does not split the row


def test_a_case_name_in_the_functions_summary_is_text():
    rows = from_json([{"name": "t.py::test[<script>]", "verdict": "regression", "message": "more"}])
    text = pr_comment.comment_body(rows, "### t.py::test[<script>]\n\n```\n+1 f\n```\n", "", "", "")
    assert "<summary>t.py::test[&lt;script&gt;]</summary>" in text and "<script>" not in text


def test_a_function_diff_with_backticks_stays_in_its_code_block():
    diff = "top functions:\n+10 ```fake``` [lib.so]"
    markdown = f"### t.py::test\n\n```\n{diff}\n```\n"
    rows = from_json([{"name": "t.py::test", "verdict": "regression", "message": "more"}])
    text = pr_comment.comment_body(rows, markdown, "", "", "")
    assert f"````\n{diff}\n````" in text


def test_a_body_too_long_for_github_is_cut(tmp_path):
    rows = from_json(
        [
            {"name": f"t.py::test[{i}]", "verdict": "improvement", "message": "x" * 200}
            for i in range(1000)
        ]
    )
    text = pr_comment.comment_body(rows, "", "", "", "")
    assert len(text) <= pr_comment.MAX_CHARS + 100 and "cut here" in text
