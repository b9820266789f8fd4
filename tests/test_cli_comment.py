"""``perfgate comment``: the pull-request comment built from what the gate writes: gate.json and
gate.md made by the verdict's own writers (judge, summary) from fixture runs, the committed
callgrind baseline against copies of it with one case's counts changed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from helpers import perfgate

from perfgate import store
from perfgate.report import comment as pr_comment
from perfgate.verdict import summary
from perfgate.verdict.judge import judge
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.rows import from_json

ROOT = Path(__file__).resolve().parent.parent

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
    row = next(line for line in text.splitlines() if "sdpa-1x4x16x32" in line)
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
    row = next(line for line in text.splitlines() if "sdpa-1x4x16x32" in line)
    assert "| improvement |" in row
    assert "Functions that changed" not in text


def test_an_unchanged_run_passes_with_every_case_folded(tmp_path):
    text = body(tmp_path, changed(1.0))
    assert "no regression** (6 unchanged)." in text
    table = text.split("<summary>6 unchanged</summary>", 1)[1]
    assert table.count("| unchanged |") == 6
    assert "Functions that changed" not in text


def test_the_command_writes_the_body_from_the_gates_files(tmp_path):
    gate_json, _ = gate_outputs(tmp_path, changed(1.05, added_function=5000))
    status, out, err = perfgate("comment", str(gate_json), "--base", "c" * 40, "--head", "d" * 40)
    assert status == 0 and err == ""
    assert out.startswith(pr_comment.MARKER) and "added_check" in out


def test_a_gate_that_wrote_nothing_says_so(tmp_path):
    status, out, _ = perfgate("comment", str(tmp_path / "gate.json"), "--run-url", "https://ci/2")
    assert status == 0
    assert out.startswith(pr_comment.MARKER) and "the gate did not run" in out
    assert "https://ci/2" in out


@pytest.mark.parametrize(
    "content, words",
    [(b"[{", "is not the gate's rows"), (b'{"format": 99, "rows": []}', "upgrade perfgate"),
     (b'[{"name": "t.py::\xff", "verdict": "new"}]', "utf-8")],
)  # fmt: skip
def test_a_broken_gate_json_is_one_line(tmp_path, content, words):
    (tmp_path / "gate.json").write_bytes(content)
    status, out, err = perfgate("comment", str(tmp_path / "gate.json"))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("perfgate comment: error: ") and words in err, err


@pytest.mark.parametrize(
    "name",
    ["t.py::test[<img src=x onerror=alert(1)>]", "t.py::test[[a link](https://x)]", "t.py::**x**"],
)
def test_text_from_the_run_is_never_markup(name):
    rows = from_json([{"name": name, "verdict": "regression", "message": "<b>slower</b> | `x`"}])
    text = pr_comment.comment_body(rows, "", "", "", "")
    table_row = next(line for line in text.splitlines() if "regression |" in line)
    assert not re.search(r"(?<!\\)[<`*]", table_row)  # each one backslash-escaped: text
    assert "](" not in table_row.replace("\\](", "")
    assert table_row.count(" | ") == 3  # the message's pipe does not split the row


def gate_markdown(*details: tuple[str, list[str]]) -> tuple[list, str]:
    """Rows and gate.md as the gate writes them, for regressions with ``(name, detail lines)``."""
    results = [GateResult(name, Verdict.REGRESSION, "more", details=tuple(lines))
               for name, lines in details]  # fmt: skip
    rows = from_json(summary.as_json(results)["rows"])
    return rows, summary.markdown(results, [], "0001_base.json")


def test_a_case_name_in_the_functions_summary_is_text():
    rows, markdown = gate_markdown(("t.py::test[<script>]", ["+1 f"]))
    text = pr_comment.comment_body(rows, markdown, "", "", "")
    assert "<summary>t.py::test[&lt;script&gt;]</summary>" in text and "<script>" not in text


def test_every_case_with_a_diff_shows_its_functions():
    """Two or more cases with a diff: each keeps its own (a greedy heading once made one)."""
    rows, markdown = gate_markdown(("t.py::test_a", ["+10 a_only [lib.so]"]),
                                   ("t.py::test_b", ["+20 b_only [lib.so]"]),
                                   ("t.py::test_c", ["+30 c_only [lib.so]"]))  # fmt: skip
    functions = pr_comment.comment_body(rows, markdown, "", "", "").split(
        "#### Functions that changed", 1
    )[1]
    for case in "abc":
        block = functions.split(f"<summary>t.py::test_{case}</summary>", 1)[1].split("</details>")[
            0
        ]
        assert f"{case}_only" in block and block.count("_only") == 1


def test_a_function_diff_with_backticks_stays_in_its_code_block():
    diff = ["top functions:", "+10 ```fake``` [lib.so]"]
    rows, markdown = gate_markdown(("t.py::test", diff))
    text = pr_comment.comment_body(rows, markdown, "", "", "")
    assert "````\n" + "\n".join(diff) + "\n````" in text


@pytest.mark.parametrize(
    "rows, words",
    [([], "nothing was gated** (no case): this check fails"),
     ([{"name": "t.py::a", "verdict": "not gated", "message": "too noisy"},
       {"name": "t.py::b", "verdict": "new"}],
      "nothing was gated** (1 not gated, 1 new): this check fails; the table says why")],
)  # fmt: skip
def test_a_gate_that_gated_nothing_does_not_read_as_no_regression(rows, words):
    text = pr_comment.comment_body(from_json(rows), "", "", "", "")
    assert words in text and ":white_check_mark:" not in text and "no regression" not in text


NAMED = "t.py::test[@octocat-@org/team-\u202eevil\u202c-\x1b[31mred-\u2066x\u2069]"


def test_names_from_the_run_mention_nobody_and_carry_no_controls():
    rows, markdown = gate_markdown((NAMED, ["+10 f @someone [lib.so]"]))
    text = pr_comment.comment_body(rows, markdown, "", "", "")
    assert text.count("<summary>") == 1 and text.count("\n| t.py::test") == 1  # table, details
    assert not re.search(r"@[A-Za-z0-9]", text)  # each "@" followed by a zero-width joiner
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", text)
    assert "\\x1b" in text and "\\u202e" in text  # shown as escapes


def unclosed(text: str) -> int:
    return text.count("<details>") - text.count("</details>")


@pytest.mark.parametrize("letter", ["a", "\u00e9", "\U0001f600"])  # 1, 2 and 4 UTF-8 bytes
def test_a_body_past_githubs_limit_is_cut_between_whole_sections(letter):
    """GitHub takes 65,536 characters; the body is cut at a section outside any <details>,
    counted in UTF-8 bytes and UTF-16 units, and keeps the cut note and the job's link."""
    names = [f"t.py::test[{letter * 40}{i}]" for i in range(400)]
    rows, markdown = gate_markdown(*[(n, [f"+{i} {letter * 60}"] * 4) for i, n in enumerate(names)])
    text = pr_comment.comment_body(rows, markdown, "", "", "https://ci/run/1")
    assert len(text.encode("utf-8")) <= 65_536 and len(text.encode("utf-16-le")) // 2 <= 65_536
    assert "cut here" in text and unclosed(text) == 0
    assert text.endswith("\n[The job, its log and the gate's files](https://ci/run/1)\n")
    before_cut = text.split("(cut here", 1)[0]
    assert before_cut.endswith("</details>\n\n") or before_cut.endswith(" |\n\n")


def test_a_body_within_the_limit_is_whole():
    rows, markdown = gate_markdown(("t.py::test", ["+1 f"]))
    text = pr_comment.comment_body(rows, markdown, "", "", "https://ci/run/1")
    assert "cut here" not in text and unclosed(text) == 0
