"""The pull-request comment of a gate's result (``perfgate comment``): a headline that says what
the gate found, what was compared, the verdict table, and the functions that changed under each
case not called unchanged, from the gate's typed rows (``gate.json``) and the function diffs of
its summary (``gate.md``); and, where the job also gated time (``perfgate check``'s rows), a
second section of the same shape for time.

The body starts with ``MARKER``, by which a workflow finds its own comment to update. Text from
the run (test names, messages, function names) is shown as text, never as markup: escaped
(``perfgate.format``), control and bidirectional characters shown as escapes, and an ``@``
kept from mentioning anyone. A body past GitHub's limit is cut between whole sections, never
inside a ``<details>`` or a code block, and still ends with the cut note and the job's link.
"""

from __future__ import annotations

import re

from perfgate import format as fmt
from perfgate.verdict.outcome import Verdict
from perfgate.verdict.rows import GateRow

LISTED = (Verdict.REGRESSION, Verdict.UNCONFIRMED, Verdict.UNDECIDED, Verdict.NOT_GATED)
LISTED += (Verdict.NEW,)
LISTED += (Verdict.NOT_RUN, Verdict.IMPROVEMENT)  # before the unchanged, which fold away

MARKER = "<!-- perfgate: pull-request instruction counts -->"
# GitHub refuses a comment body over 65,536 characters; it is measured here both in UTF-16 code
# units and in UTF-8 bytes, and the larger must fit (``size``)
MAX_SIZE = 65_536
# a section of the gate's summary with details under a case: ``### name``, a blank line, a fence
# and the same fence closing it (the fence is longer than any run of backticks inside)
SECTION = re.compile(r"^### ([^\n]+)\n\n(`{3,})\n(.*?)\n\2$", re.MULTILINE | re.DOTALL)
ZERO_WIDTH_JOINER = "\u200d"  # after an "@": shown the same, no longer a mention


def size(text: str) -> int:
    """``text``'s length as GitHub may count it: the larger of its UTF-16 code units and its
    UTF-8 bytes."""
    return max(len(text.encode("utf-16-le")) // 2, len(text.encode("utf-8")))


def unmentioned(value: object) -> str:
    """``value`` with every ``@`` followed by a zero-width joiner: ``@user`` and ``@org/team``
    read the same and notify nobody."""
    return str(value).replace("@", "@" + ZERO_WIDTH_JOINER)


def text(value: object) -> str:
    """Stored text as one line of inert markdown (a paragraph or a table cell)."""
    return fmt.markdown(unmentioned(value))


def html_text(value: object) -> str:
    """Stored text inside an HTML element (``<summary>``), where markdown is not read."""
    return fmt.html(unmentioned(value))


def commit(sha: str) -> str:
    """A commit's short hash, its hex digits only."""
    return re.sub(r"[^0-9a-f]", "", sha.lower())[:12]


def function_diffs(markdown: str) -> dict[str, list[str]]:
    """The details the gate's summary shows under each case, by its heading (the name as
    ``format.markdown`` wrote it): for a count, the functions whose instructions changed most."""
    return {m.group(1): m.group(3).split("\n") for m in SECTION.finditer(markdown)}


COUNTS, TIME = "Instruction counts", "Time"


def headline(rows: list[GateRow], what: str = COUNTS) -> str:
    """What the gate found, in the words its exit status says: a regression fails the check,
    and so does a gate that gated nothing (exit 6); undecided cases are said, not failed."""
    count = {verdict: sum(row.verdict is verdict for row in rows) for verdict in Verdict}
    summary = ", ".join(f"{n} {verdict}" for verdict, n in count.items() if n) or "no case"
    if count[Verdict.REGRESSION]:
        return f"**:x: {what}: a confirmed regression** ({summary}): this check fails."
    if not any(row.gated for row in rows):
        why = "the table says why" if rows else "see the job's log"
        return f"**:x: {what}: nothing was gated** ({summary}): this check fails; {why}."
    if count[Verdict.UNDECIDED]:
        return (
            f"**:warning: {what}: no regression, {count[Verdict.UNDECIDED]} undecided** "
            f"({summary}): the data neither show a change nor rule one out (listed first)."
        )
    return f"**:white_check_mark: {what}: no regression** ({summary})."


def row_cells(row: GateRow) -> str:
    limit = f"{row.threshold:.1%}" if row.threshold is not None else ""
    limit += f" ({text(row.threshold_source)})" if row.threshold_source and limit else ""
    cells = [text(row.name), text(row.verdict), text(row.message)]
    return "| " + " | ".join([*cells, limit]) + " |"


HEADER = ["| case | verdict | instructions per call | threshold |", "| --- | --- | --- | --- |"]
TIME_HEADER = ["| case | verdict | time, interval and decided by | threshold |", HEADER[1]]


def sections(rows: list[GateRow], markdown: str, header: list[str] = HEADER) -> list[list[str]]:
    """The comment after its headline, in sections that are each kept whole or cut whole: the
    table's rows one by one, the unchanged cases' ``<details>``, each case's changed
    functions."""
    listed = [row for verdict in LISTED for row in rows if row.verdict is verdict]
    unchanged = [row for row in rows if row not in listed]
    parts = [[""] + header] if listed else []
    parts += [[row_cells(row)] for row in listed]
    if unchanged:
        folded = ["", f"<details><summary>{len(unchanged)} unchanged</summary>", "", *header]
        parts.append([*folded, *map(row_cells, unchanged), "", "</details>"])
    diffs = function_diffs(markdown)
    changed = [
        r for r in rows if r.verdict is not Verdict.UNCHANGED and fmt.markdown(r.name) in diffs
    ]
    if changed:
        parts.append(["", "#### Functions that changed"])
    for row in changed:
        block = fmt.markdown_block([unmentioned(line) for line in diffs[fmt.markdown(row.name)]])
        parts.append(
            ["", f"<details><summary>{html_text(row.name)}</summary>", "", *block, "", "</details>"]
        )
    return parts


def comment_body(
    rows: list[GateRow],
    markdown: str,
    base: str,
    head: str,
    run_url: str,
    timed: list[GateRow] | None = None,
) -> str:
    """The comment: the marker, a headline, what was compared, then as many whole sections as
    fit GitHub's limit, a cut note when some did not, and the job's link. ``timed``: the rows
    of ``perfgate check`` on the same runner, a section of their own after the counts'."""
    compared = (
        f"This pull request's tree (`{commit(head)}`) against the base branch "
        f"(`{commit(base)}`), both counted by callgrind on the same runner."
    )
    footer = f"\n[The job, its log and the gate's files]({run_url})\n" if run_url else ""
    body = "\n".join([MARKER, headline(rows), "", compared])
    parts = sections(rows, markdown)
    if timed is not None:
        parts += [["", headline(timed, TIME), "", TIMED]]
        parts += sections(timed, "", TIME_HEADER)
    whole = body + "".join("\n" + "\n".join(part) for part in parts) + "\n"
    if size(whole + footer) <= MAX_SIZE:
        return whole + footer
    note = (
        f"\n\n(cut here: the whole comment is {size(whole):,} characters, past the "
        f"{MAX_SIZE:,} GitHub takes; every verdict is in the job's files)\n"
    )
    room = MAX_SIZE - size(note + footer)
    for part in parts:
        longer = body + "\n" + "\n".join(part)
        if size(longer) > room:
            break
        body = longer
    return body + note + footer


TIMED = (
    "The same runner timed both trees (`perfgate check`): the stored comparison against the "
    "base branch's run, then an interleaved A/B of every case it could not settle; undecided "
    "cases warn."
)


def no_summary_body(gate_json: str, run_url: str) -> str:
    """The comment when the gate wrote nothing: it could not run (see the job's log)."""
    where = f" ([the job]({run_url}))" if run_url else ""
    return (
        f"{MARKER}\n**:x: Instruction counts: the gate did not run** ({text(gate_json)} "
        f"was not written): see the job's log{where}.\n"
    )
