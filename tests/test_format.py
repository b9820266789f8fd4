"""``perfgate.format``: one way to print a number, and stored text escaped for where it is shown.

The second half renders hostile stored text (benchmark names, environment strings and gate
messages from a run a pull request could bring) through every markdown output perfgate writes
(``gate.md``, ``compare --markdown``, ``history --markdown``, the dashboard's job summary), with
a CommonMark renderer that lets raw HTML through, and checks that none of it became a heading,
an image, a link, an HTML element or a control byte; and through every terminal output, which
must hold no control byte from it.
"""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import STEPPED, entry, rounds, rounds_at, run_json, run_of, write_history

from perfgate import format as fmt
from perfgate.cli import main
from perfgate.verdict import summary
from perfgate.verdict.judge import judge


# --- numbers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "seconds, text",
    [(4.335e-5, "43.4 us"), (7.3e-3, "7.30 ms"), (6.43, "6.43 s"), (2.5e-9, "2.50 ns"),
     (123.4e-6, "123 us"), (None, "-"), (float("nan"), "-")],
)  # fmt: skip
def test_one_time_format(seconds, text):
    assert fmt.fmt_time(seconds) == text


def test_the_gate_prints_times_as_compare_does():
    baseline = run_of(entry("x::t", rounds_at(4.335e-5, 1)))
    current = run_of(entry("x::t", rounds_at(4.4e-5, 2)))
    (result,) = judge([baseline], current)
    assert summary.cells(result)[1] == fmt.fmt_time(result.comparison.baseline_median)
    assert summary.cells(result)[1].endswith(" us")


@pytest.mark.parametrize(
    "before, after, text",
    [(1.0, 1.031, "+3.1 %"), (2.0, 1.0, "-50.0 %"), (None, 1.0, "-"), (1.0, None, "-"),
     (0.0, 1.0, "-")],
)  # fmt: skip
def test_one_change_since_the_previous_run(before, after, text):
    assert fmt.fmt_change(before, after) == text


def test_iqr_of_quartiles_or_missing():
    assert fmt.fmt_iqr((1e-3, 1.5e-3)) == "500 us" and fmt.fmt_iqr(None) == "-"


@pytest.mark.parametrize("text", ["..", ".", "../../etc", "/abs/key", "a/b", ".hidden", "", "\x1b"])
def test_a_slug_is_one_plain_file_name(text):
    name = fmt.slug(text)
    assert name not in ("", ".", "..") and "/" not in name and not name.startswith(".")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name)


def test_format_is_the_ground_floor():
    tree = ast.parse(Path(fmt.__file__).read_text())
    imported = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in imported for a in n.names] + [
        n.module or "" for n in imported if isinstance(n, ast.ImportFrom)
    ]
    assert not [name for name in names if name.startswith("perfgate")]


# --- escapes, one per target ------------------------------------------------------------------
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    "text", ["\x1b[2J\x1b[8mhidden", "two\nlines", "\x9b2J", "tab\there", "rtl\u202eevil", "\x07"]
)
def test_terminal_shows_every_control_character_as_an_escape(text):
    shown = fmt.terminal(text)
    assert not CONTROL.search(shown) and "\n" not in shown
    assert fmt.terminal("plain test_x[1-2] ok") == "plain test_x[1-2] ok"


def test_a_code_block_cannot_be_closed_from_inside():
    block = fmt.markdown_block(["a", "````", "```` not a fence", "\x1b[2J"])
    assert block[0] == block[-1] == "`````" and "\x1b" not in "".join(block)


def test_html_escapes_quotes_and_markup():
    assert fmt.html("<a href='x'>&\"") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&quot;"


# --- hostile stored text through every output ------------------------------------------------
HOSTILE = [
    "test_k[a`\n# FAKE HEADING: all passed\n`]",
    "test_k[![img](https://evil.example/x.png)]",
    "test_k[<script>alert(1)</script><img src=x onerror=alert(1)>]",
    "test_k[\x1b[2J\x1b[8mhidden\x9b2J]",
    "test_k[a|<b>pipe</b>|\\|<i>x</i>]",
    "test_k[[link](https://evil.example)]",
    "test_k[&lt;script&gt; **bold** _em_ ~~del~~]",
    "test_k[\n=====\n]",
    "test_k[\r\n<details open>\n\n- item]",
]
ENVIRONMENT = {
    "torch": "2.13\n# FAKE HEADING: all passed",
    "triton": "<img src=x onerror=alert(1)>",
    "python": "\x1b]0;title\x07\x1b[2J",
}
OURS = re.compile(r"</?details>|<summary>[\w ]*</summary>|\s")  # the HTML perfgate writes itself
OWN_EMPHASIS = re.compile(r"The A/B stopped \(.*\)|\d+ test\(s\) failed")  # nightly.md's bold


def rendered(text: str):
    """The tokens of ``text`` rendered as CommonMark with GFM tables and raw HTML on."""
    markdown_it = pytest.importorskip(
        "markdown_it", reason="pip install markdown-it-py (test group)"
    )
    parser = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = parser.parse(text)
    return tokens + [child for token in tokens for child in token.children or []]


def assert_inert(text: str) -> None:
    """Nothing of the hostile text became a heading, image, link, HTML or a control byte."""
    tokens = rendered(text)
    headings = [
        (t, tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"
    ]
    assert not [text for token, text in headings if text.startswith("FAKE")], headings
    assert not [text for token, text in headings if token.markup in "=-"], headings  # setext
    assert not [t for t in tokens if t.type == "image"], text
    links = [t.attrGet("href") for t in tokens if t.type == "link_open"]
    assert all(href.startswith("./") for href in links), links  # only perfgate's own pages
    markup = [t.content for t in tokens if t.type in ("html_block", "html_inline")]
    assert all(OURS.sub("", content) == "" for content in markup), markup
    emphasis = [tokens[i + 1].content for i, t in enumerate(tokens)
                if t.type in ("em_open", "strong_open", "s_open")]  # fmt: skip
    assert all(OWN_EMPHASIS.fullmatch(words) for words in emphasis), emphasis
    assert not CONTROL.search(text.replace("\r", ""))


def fullname(name: str) -> str:
    return f"perf_tests/test_x.py::{name}"


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    """Two runs of one hardware key, every benchmark named with hostile text, the second in
    another hostile environment and slower."""
    folder = tmp_path / "baselines" / "TEST-KEY" / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    for number, (slowdown, software) in enumerate([(1.0, None), (1.5, ENVIRONMENT)], start=1):
        entries = [entry(fullname(n), rounds(i + number, slowdown)) for i, n in enumerate(HOSTILE)]
        data = run_json(*entries, software=software, datetime=f"2026-11-2{number}T10:00:00+00:00")
        (folder / f"000{number}_run.json").write_text(json.dumps(data))
    return tmp_path / "baselines"


def command(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_gate_md_renders_hostile_names_and_environment_inert():
    baseline = run_of(*[entry(fullname(n), rounds(i)) for i, n in enumerate(HOSTILE)])
    slower = [entry(fullname(n), rounds(i, 1.5)) for i, n in enumerate(HOSTILE[1:])]
    new = entry(fullname("test_k[new `\n# FAKE]"), rounds(9))
    current = run_of(*slower, new, software=ENVIRONMENT)
    hostile_details = ("```", "# FAKE HEADING", "<script>alert(1)</script>", "````")
    results = [replace(r, details=hostile_details) for r in judge([baseline], current)]
    changes = summary.environment_difference(baseline, current)
    assert_inert(summary.markdown(results, changes, "baselines/0001_<img src=x onerror=1>.json"))
    lines = summary.terminal_lines(results, changes, "\x1b[2J")
    assert not any(CONTROL.search(line) or "\n" in line for line in lines)


@pytest.mark.parametrize("markdown", [True, False])
def test_compare_renders_hostile_names_inert(hostile_store, markdown):
    where = ["--baselines", str(hostile_store), "--hardware", "TEST-KEY"]
    status, out, err = command("compare", "1", "2", *where, *(["--markdown"] * markdown))
    assert status == 0, err
    assert_inert(out) if markdown else None
    assert not CONTROL.search(out) and "FAKE HEADING" in out  # shown, as text


@pytest.mark.parametrize("markdown", [True, False])
def test_history_renders_hostile_names_inert(hostile_store, markdown):
    where = ["--baselines", str(hostile_store), "--hardware", "TEST-KEY", "--no-plots"]
    status, out, err = command("history", "test_k", *where, *(["--markdown"] * markdown))
    assert status == 0, err
    assert_inert(out) if markdown else None
    assert not CONTROL.search(out)


class Elements(HTMLParser):
    """The elements of a page, and how many inline scripts it has (plotly draws a plot with one)."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []
        self.inline_scripts = 0

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))
        self.inline_scripts += tag == "script" and "src" not in dict(attrs)


def test_the_dashboard_renders_hostile_names_inert(tmp_path):
    pytest.importorskip("plotly", reason="the dashboard needs plotly")
    hostile = (
        "test_k[`\n# FAKE HEADING\n<img src=x onerror=alert(1)>![i](https://evil.example)"
        "</script><script>alert(2)</script>]"
    )
    folder = write_history(tmp_path / "baselines", runs=14, step_at=11)
    for path in folder.glob("*.json"):
        path.write_text(path.read_text().replace(STEPPED, json.dumps(hostile)[1:-1]))
    night = tmp_path / "nightly.json"
    shutil.move(folder / "0014_nightly.json", night)
    gate = tmp_path / "gate.json"
    name = f"perf_tests/test_synthetic.py::{hostile}"
    rows = [{"name": name, "verdict": "regression", "message": "<script>x</script>\n# FAKE",
             "change_percent": 9.0},
            {"name": "gone[\n# FAKE]", "verdict": "regression", "message": "![i](x)"}]  # fmt: skip
    gate.write_text(json.dumps(rows))
    site = tmp_path / "site"
    root = str(tmp_path / "baselines")
    status, out, err = command(
        "dashboard", "--out", str(site), "--baselines", root, str(night), "--gate", str(gate)
    )
    assert status == 0, err
    assert "New steps" in out and "Confirmed regressions" in out
    assert_inert(out)
    for page in site.rglob("*.html"):
        parser = Elements()
        parser.feed(page.read_text())
        assert parser.inline_scripts == (0 if page.name == "index.html" else 1), page
        assert not [t for t, attrs in parser.found if t == "img" or "onerror" in attrs], page


def test_nightly_md_renders_hostile_names_and_messages_inert():
    from perfgate.report.nightly import markdown as nightly_markdown
    from perfgate.verdict import nightly
    from perfgate.verdict.rows import GateRow

    baseline = run_of(*[entry(fullname(n), rounds(i)) for i, n in enumerate(HOSTILE)])
    current = run_of(*[entry(fullname(n), rounds(i, 1.5)) for i, n in enumerate(HOSTILE)])
    rows = [replace(GateRow.of(r), message=HOSTILE[0]) for r in judge([baseline], current)]
    night = nightly.Night(nightly.decide(rows, {rows[0].name: HOSTILE[2]}, {}),
                          base_commit="<img src=x onerror=1>", stopped="\x1b[2J# FAKE")  # fmt: skip
    assert_inert(nightly_markdown(night))
