"""The pull-request comment of the instruction-count check (.github/workflows/pr-instructions.yml):
the verdict table and the functions that changed, from what the gate wrote: ``gate.json``, read
through its one reader (``perfgate.verdict.rows.from_json``), and the function diffs of
``gate.md``. The workflow runs it with the gate's own environment:

    python tools/pr_comment.py perfgate-results/gate.json --base SHA --head SHA > comment.md

The body starts with ``MARKER``, by which the workflow finds its own comment to update. Text
from the run (test names, messages, function names) is shown as text, never as markup.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

from perfgate.verdict.outcome import Verdict
from perfgate.verdict.rows import GateRow, RowsError, from_json

LISTED = (Verdict.REGRESSION, Verdict.UNCONFIRMED, Verdict.NOT_GATED, Verdict.NEW)
LISTED += (Verdict.IMPROVEMENT,)  # before the unchanged, which fold away

MARKER = "<!-- perfgate: pull-request instruction counts -->"
MAX_CHARS = 60_000  # GitHub refuses a comment over 65,536 characters
DIFF = re.compile(r"^### (.+)\n\n(`{3,})\n(.*?)\n\2$", re.MULTILINE | re.DOTALL)
UNESCAPE = re.compile(r"\\(.)")  # a backslash escape of format.markdown
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def text(value: object) -> str:
    """``value`` as literal text in markdown: one line, HTML and markdown punctuation escaped."""
    escaped = " ".join(str(value).split()).replace("&", "&amp;").replace("<", "&lt;")
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", escaped)


def commit(sha: str) -> str:
    """A commit's short hash, its hex digits only."""
    return re.sub(r"[^0-9a-f]", "", sha.lower())[:12]


def html_text(value: object) -> str:
    """``value`` as literal text inside an HTML element (``<summary>``), where markdown is not
    read: one line, HTML escaped."""
    return html.escape(" ".join(str(value).split()))


def fenced(body: str) -> str:
    """``body`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"


def function_diffs(markdown: str) -> dict[str, str]:
    """The details the gate's summary shows under a case (``### name`` and a code block): for
    an instruction count, the functions whose instructions per call changed most. The heading
    holds the name markdown-escaped; the key is the name as written."""
    return {UNESCAPE.sub(r"\1", m.group(1)): m.group(3) for m in DIFF.finditer(markdown)}


def headline(rows: list[GateRow]) -> str:
    count = {verdict: sum(row.verdict is verdict for row in rows) for verdict in LISTED}
    parts = [f"{n} {verdict}" for verdict, n in count.items() if n]
    unchanged = sum(row.verdict is Verdict.UNCHANGED for row in rows)
    parts += [f"{unchanged} unchanged"] if unchanged else []
    summary = ", ".join(parts) or "no case"
    if count[Verdict.REGRESSION]:
        return f"**:x: Instruction counts: a confirmed regression** ({summary}): this check fails."
    return f"**:white_check_mark: Instruction counts: no regression** ({summary})."


def row_cells(row: GateRow) -> str:
    limit = f"{row.threshold:.1%}" if row.threshold is not None else ""
    limit += f" ({text(row.threshold_source)})" if row.threshold_source and limit else ""
    cells = [text(row.name), text(row.verdict), text(row.message)]
    return "| " + " | ".join([*cells, limit]) + " |"


def verdict_table(rows: list[GateRow]) -> list[str]:
    header = ["| case | verdict | instructions per call | threshold |", "| --- | --- | --- | --- |"]
    listed = [row for verdict in LISTED for row in rows if row.verdict is verdict]
    unchanged = [row for row in rows if row not in listed]
    lines = [*header, *map(row_cells, listed)] if listed else []
    if unchanged:
        lines += ["", f"<details><summary>{len(unchanged)} unchanged</summary>", ""]
        lines += [*header, *map(row_cells, unchanged), "", "</details>"]
    return lines


def changed_functions(rows: list[GateRow], diffs: dict[str, str]) -> list[str]:
    lines = []
    for row in rows:
        if row.verdict is not Verdict.UNCHANGED and row.name in diffs:
            lines += ["", f"<details><summary>{html_text(row.name)}</summary>", ""]
            lines += [fenced(diffs[row.name]), "", "</details>"]
    return ["", "#### Functions that changed", *lines] if lines else []


def comment_body(rows: list[GateRow], markdown: str, base: str, head: str, run_url: str) -> str:
    """The comment: the marker, a headline, what was compared, the verdict table, and the
    functions that changed under each case the gate did not call unchanged."""
    compared = (
        f"This pull request's tree (`{commit(head)}`) against the base branch "
        f"(`{commit(base)}`), both counted by callgrind on the same runner."
    )
    lines = [MARKER, headline(rows), "", compared, "", *verdict_table(rows)]
    lines += changed_functions(rows, function_diffs(markdown))
    footer = ["", f"[The job, its log and the gate's files]({run_url})"] if run_url else []
    body = "\n".join(lines)
    if len(body) > MAX_CHARS:
        body = body[:MAX_CHARS].rsplit("\n", 1)[0] + "\n\n(cut here: the full summary is in "
        body += "the job's files)"
    return body + "\n" + "\n".join(footer) + "\n"


def no_summary_body(gate_json: Path, run_url: str) -> str:
    """The comment when the gate wrote nothing: it could not run (see the job's log)."""
    where = f" ([the job]({run_url}))" if run_url else ""
    return (
        f"{MARKER}\n**:x: Instruction counts: the gate did not run** ({text(gate_json.name)} "
        f"was not written): see the job's log{where}.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the pull-request comment of the gate's result")
    parser.add_argument("gate_json", type=Path, metavar="GATE_JSON")
    parser.add_argument("--base", default="", help="the base branch's commit")
    parser.add_argument("--head", default="", help="the pull request's commit")
    parser.add_argument("--run-url", default="", help="the workflow run's page")
    args = parser.parse_args(argv)
    if not args.gate_json.is_file():
        sys.stdout.write(no_summary_body(args.gate_json, args.run_url))
        return 0
    try:
        rows = from_json(json.loads(args.gate_json.read_text(encoding="utf-8")))
    except (OSError, ValueError, RowsError) as error:
        print(f"pr_comment: {args.gate_json} is not the gate's JSON ({error})", file=sys.stderr)
        return 2
    summary = args.gate_json.with_suffix(".md")
    markdown = summary.read_text(encoding="utf-8") if summary.is_file() else ""
    sys.stdout.write(comment_body(rows, markdown, args.base, args.head, args.run_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
