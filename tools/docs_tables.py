"""Markdown for the documentation site's reference: table cells and tables, the comments beside
a class's constants, and the sections read from the verdict, the stored fields and the exit
statuses (tools/docs_reference.py puts them on the pages)."""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize

CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def cell(text: object) -> str:
    """Text for a markdown table cell: one line, pipes escaped, and outside code spans no raw
    HTML (``<hardware key>`` shows as written); '-' for no text."""
    text = " ".join(str(text).split()).replace("|", r"\|")
    parts = CODE_SPAN.split(text)  # plain, (ticks, code, plain)*
    for i in range(0, len(parts), 3):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for i in range(1, len(parts), 3):
        parts[i] = parts[i] + parts[i + 1] + parts[i]
        parts[i + 1] = ""
    return "".join(parts) or "-"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0]


# --- exit codes ----------------------------------------------------------------------------------
def exit_codes_reference() -> str:
    """The exit statuses of a pytest session with perfgate, and of the perfgate command; the
    numbers come from the code's constants."""
    import pytest

    from perfgate.ab.exits import GATED_NOTHING, INCOMPLETE
    from perfgate.cli import INTERRUPTED
    from perfgate.cli.merge import MERGE_REFUSED
    from perfgate.session.baseline import FIRST_BASELINE, GATE_NOT_RUN
    from perfgate.store.saving import SAVE_FAILED

    code = pytest.ExitCode
    command_error = 2  # perfgate/cli returns it as a literal (perfgate.cli.main)
    pytest_rows = [
        (code.OK, "every benchmark was gated or not gated with a reason, and none regressed"),
        (code.TESTS_FAILED, "a confirmed regression (or an ordinary failing test)"),
        (
            code.INTERRUPTED,
            "interrupted (Ctrl-C or SIGTERM); a run being saved is saved "
            "first, or kept in `perfgate-results/unsaved/`",
        ),
        (code.USAGE_ERROR, USAGE),
        (GATE_NOT_RUN, GATE_CANNOT_RUN),
        (
            SAVE_FAILED,
            "`--benchmark-save` could not save the run into the store (a full or "
            "read-only disk, a folder that is not one): the line names the error and "
            "the file in `perfgate-results/unsaved/` that holds the run; or "
            "`--benchmark-json` could not be written (a full disk): that file is as it was",
        ),
        (
            FIRST_BASELINE,
            "nothing to gate yet: there was no baseline, and this gated session saved the "
            "first one (`--perf-gate --benchmark-save=NAME`); the next session gates on it",
        ),
    ]
    command_rows = [
        (
            0,
            "done (`ab`, `bisect`, `nightly`: no regression; `bisect`: the first bad commit "
            "is named)",
        ),
        (1, "`ab` or `nightly`: a case is a regression; `bisect`: BAD is not slower than GOOD"),
        (command_error, COMMAND_ERROR),
        (
            MERGE_REFUSED,
            "`merge` refuses its runs: another hardware key or commit, a case in "
            "two shards, a shard missing or given twice, two splits, or a run that "
            "is no shard; `nightly --shards`: the folders are not the N shard nights of one "
            "night (a label that is not I/N with 1 <= I <= N <= 1000, N not the same, a part "
            "missing or given twice)",
        ),
        (
            GATED_NOTHING,
            "`ab` or `nightly` gated no case (every case not gated, an empty gate.json, every row "
            "not run): a comparison that judged nothing never passes",
        ),
        (
            INCOMPLETE,
            "`ab` or `nightly`: `--time-limit` stopped the A/B with cases undecided; what it "
            "decided is written, and `--resume` continues it",
        ),
        (
            INTERRUPTED,
            "interrupted by Ctrl-C or SIGTERM: the git worktrees of `ab` and "
            "`bisect` are removed; `dashboard` builds beside `--out` and swaps it in, "
            "so the old site stays whole",
        ),
    ]
    parts = ["### pytest with perfgate (`pytest --perf-gate`, `--benchmark-save`, ...)", ""]
    parts += [table(["exit", "meaning"], [[str(int(n)), m] for n, m in pytest_rows]), ""]
    parts += ["### The `perfgate` command", ""]
    parts += [table(["exit", "meaning"], [[str(int(n)), m] for n, m in command_rows])]
    parts += ["", "`perfgate profile` returns pytest's exit status."]
    return "\n".join(parts)


USAGE = (
    "a usage error, one line, before anything runs: a bad option value "
    "(`--perf-gate-threshold=fast`), a marker threshold that is neither a fraction nor a "
    "percentage (`threshold=10`: `10%` or `0.1`?), a `--benchmark-save` name that cannot be a "
    "file name, a `--perf-shard` that names no part (`0/2`, `2`, `''` from an unset variable, N "
    "above 1000), `-n` above the number of GPUs under `--device cuda`, a MIG instance as the CUDA "
    "device, an output path that cannot be written (`--perf-gate-report`, `--benchmark-json`, "
    "`--perf-profile`), `--perf-gate-report` ending in `.json` (its JSON twin would be the same "
    "file), a path option written apart from its value that moved pytest's rootdir above the "
    "project (write `--perf-baselines=DIR`); without the gate, a missing `--perf-baselines` "
    "folder, a `--benchmark-storage` naming the baseline root, a broken baseline or one dated "
    "in the future (with the gate these are the next row's)"
)
GATE_CANNOT_RUN = (
    "**the gate could not run or gated nothing**, one line saying why and what to do: no "
    "baseline for this hardware key (the line names the keys that exist); "
    "`--benchmark-compare=ID` names no run; a broken member of the baseline set; an unknown "
    "`--perf-gate-threshold` family or test (the line lists the valid ones); nothing to compare "
    "(`--device cuda` without a GPU, a `-k` that matches nothing in the baseline, "
    "`--benchmark-disable`, every case skipped); pytest-xdist workers whose runs cannot be one "
    "run (two GPU models); `--perf-measure instructions` without valgrind"
)
COMMAND_ERROR = (
    "an error, one line, checked before any work: a missing, unreadable or badly typed run; a "
    "filter or `history` pattern that matches nothing; a bad argument (`--threshold=-5%`, "
    "`--alpha 5`, a `profile` TEST_ID that names no file); an `--out` or `--summary` that "
    "cannot be written; a failing block of `ab` (its pytest output is kept beside the JSON); "
    "`compare` given a timed and a counted run; and, after the work, a disk that fills up while "
    "`dashboard` or `nightly` writes (what was there stays as it was, never half a file)"
)


# --- verdicts and rules --------------------------------------------------------------------------
def trailing_comments(source: str) -> dict[int, str]:
    """Line number (1-based) -> the comment at the end of that line."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string.lstrip("# ") for t in tokens if t.type == tokenize.COMMENT}


def constants(cls: type) -> list[tuple[str, object, str]]:
    """(name, value, the comment beside it) of each constant a class body assigns."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = trailing_comments(source)
    rows = []
    for node in ast.parse(source).body[0].body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            for name in names:
                if isinstance(name, ast.Name) and name.id.isupper():
                    rows.append((name.id, getattr(cls, name.id), comments.get(node.lineno, "")))
    return rows


def verdicts_reference() -> str:
    """Each verdict word, whether it counts as gated, and what the code says it means; the
    reasons a case is not gated; then the rules behind them, per kind of measurement."""
    from perfgate.verdict.outcome import Verdict
    from perfgate.verdict.reason import Reason
    from perfgate.verdict.rules import RULES

    meanings = {name: comment for name, _, comment in constants(Verdict)}
    rows = [
        [f"`{v.value}`", "yes" if v.gated else "no", cell(meanings.get(v.name, ""))]
        for v in Verdict
    ]
    parts = [table(["verdict", "gated", "meaning"], rows), "", "### Why a case is not gated", ""]
    parts += [cell(first_paragraph(Reason.__doc__)), ""]
    reasons = [[f"`{value.value}`", cell(comment)] for _, value, comment in constants(Reason)]
    parts += [table(["reason", "meaning"], reasons), "", "### The rules", ""]
    rule_rows = [
        [cell(measured), f"`{rule.name}`", cell(first_paragraph(type(rule).__doc__))]
        for measured, rules in RULES.items()
        for rule in rules
    ]
    parts.append(table(["measured", "rule", "fails when"], rule_rows))
    return "\n".join(parts)


# --- the stored run format -----------------------------------------------------------------------
def fields_reference() -> str:
    """Every field name perfgate stores, by the class of perfgate/fields.py that owns it."""
    from perfgate import fields

    parts = []
    for cls in (
        fields.RunField,
        fields.Field,
        fields.Declared,
        fields.Clock,
        fields.Gpu,
        fields.Profile,
        fields.Fact,
    ):
        rows = [
            [f"`{value}`", f"`{name}`", cell(comment)]
            for name, value, comment in constants(cls)
            if isinstance(value, str)
        ]
        parts += [f"### {cls.__name__}", "", cell(first_paragraph(cls.__doc__)), ""]
        parts += [table(["stored as", "name in perfgate.fields", "meaning"], rows), ""]
    return "\n".join(parts)


def gate_json_reference() -> str:
    """The rows of gate.json: the file's format and each field of ``GateRow`` with its type."""
    import dataclasses

    from perfgate.verdict import rows

    parts = [cell(first_paragraph(rows.__doc__)), "", cell(inspect.getdoc(rows.GateRow)), ""]
    parts += [f'Format {rows.FORMAT}: `{{"{rows.KEY}": {rows.FORMAT}, "rows": [row, ...]}}`.', ""]
    fields = [
        [f"`{f.name}`", str(f.type).replace(" | ", " or ")]
        for f in dataclasses.fields(rows.GateRow)
    ]
    fields.append(["`gated`", "bool"])  # written beside the fields, for readers without perfgate
    parts.append(table(["field", "type"], fields))
    return "\n".join(parts)
