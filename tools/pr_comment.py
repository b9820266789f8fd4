"""The pull-request comment of the instruction-count check (.github/workflows/pr-instructions.yml):
the verdict table and the functions that changed, from what the gate wrote (``gate.json``, and
the function diffs of ``gate.md``). Standard library only: the workflow runs it with the runner's
python3.

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

MARKER = "<!-- perfgate: pull-request instruction counts -->"
MAX_CHARS = 60_000  # GitHub refuses a comment over 65,536 characters
LISTED = ("regression", "unconfirmed", "not gated", "new", "improvement")  # before "unchanged"
DIFF = re.compile(r"^### (.+)\n\n(`{3,})\n(.*?)\n\2$", re.MULTILINE | re.DOTALL)
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def text(value: object) -> str:
    """``value`` as literal text in markdown: one line, HTML and markdown punctuation escaped."""
    escaped = " ".join(str(value).split()).replace("&", "&amp;").replace("<", "&lt;")
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", escaped)


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
    an instruction count, the functions whose instructions per call changed most."""
    return {match.group(1): match.group(3) for match in DIFF.finditer(markdown)}


def headline(rows: list[dict]) -> str:
    count = {verdict: sum(row.get("verdict") == verdict for row in rows) for verdict in LISTED}
    parts = [f"{n} {verdict}" for verdict, n in count.items() if n]
    unchanged = sum(row.get("verdict") == "unchanged" for row in rows)
    parts += [f"{unchanged} unchanged"] if unchanged else []
    summary = ", ".join(parts) or "no case"
    if count["regression"]:
        return f"**:x: Instruction counts: a confirmed regression** ({summary}): this check fails."
    return f"**:white_check_mark: Instruction counts: no regression** ({summary})."


def row_cells(row: dict) -> str:
    threshold = row.get("threshold")
    limit = f"{threshold:.1%}" if isinstance(threshold, int | float) else ""
    source = row.get("threshold_source")
    limit += f" ({text(source)})" if source and limit else ""
    cells = [text(row.get("name", "")), text(row.get("verdict", "")), text(row.get("message", ""))]
    return "| " + " | ".join([*cells, limit]) + " |"


def verdict_table(rows: list[dict]) -> list[str]:
    header = ["| case | verdict | instructions per call | threshold |", "| --- | --- | --- | --- |"]
    listed = [r for verdict in LISTED for r in rows if r.get("verdict") == verdict]
    unchanged = [r for r in rows if r not in listed]
    lines = [*header, *map(row_cells, listed)] if listed else []
    if unchanged:
        lines += ["", f"<details><summary>{len(unchanged)} unchanged</summary>", ""]
        lines += [*header, *map(row_cells, unchanged), "", "</details>"]
    return lines


def changed_functions(rows: list[dict], diffs: dict[str, str]) -> list[str]:
    lines = []
    for row in rows:
        name = row.get("name", "")
        if row.get("verdict") != "unchanged" and name in diffs:
            lines += ["", f"<details><summary>{html_text(name)}</summary>", "", fenced(diffs[name])]
            lines += ["", "</details>"]
    return ["", "#### Functions that changed", *lines] if lines else []


def comment_body(rows: list[dict], markdown: str, base: str, head: str, run_url: str) -> str:
    """The comment: the marker, a headline, what was compared, the verdict table, and the
    functions that changed under each case the gate did not call unchanged."""
    compared = (
        f"This pull request's tree (`{text(head)[:12]}`) against the base branch "
        f"(`{text(base)[:12]}`), both counted by callgrind on the same runner."
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
        rows = json.loads(args.gate_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"pr_comment: {args.gate_json} is not the gate's JSON ({error})", file=sys.stderr)
        return 2
    summary = args.gate_json.with_suffix(".md")
    markdown = summary.read_text(encoding="utf-8") if summary.is_file() else ""
    sys.stdout.write(comment_body(rows, markdown, args.base, args.head, args.run_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
