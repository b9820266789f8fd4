"""The documentation site's reference, generated from the code at build time (an MkDocs hook,
``hooks:`` in mkdocs.yml): a page line ``<!-- reference: NAME -->`` becomes the markdown of
``SECTIONS[NAME]``. Nothing here copies an option, a command, a verdict word or a field name:
each is read from the parser, the enum or the class that defines it, so the reference changes
with the code (tests/test_docs.py checks that every command and option appears).
"""

from __future__ import annotations

import argparse
import ast
import configparser
import inspect
import io
import re
import sys
import textwrap
import tokenize
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- reference: ([\w-]+) -->$", re.MULTILINE)


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


# --- the perfgate command (argparse) -------------------------------------------------------------
def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's commands by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def argument_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        meaning = formatter._expand_help(action) if action.help else ""
        if action.choices and not isinstance(action.choices, dict):
            meaning += f" (one of: {', '.join(map(str, action.choices))})"
        rows.append([f"`{invocation}`", cell(meaning)])
    return rows


def command_section(name: str, parser: argparse.ArgumentParser, summary: str) -> str:
    parts = [f"## {name}", "", cell(summary or parser.description or ""), ""]
    parts += ["```text", parser.format_usage().strip(), "```", ""]
    parts += [table(["argument", "meaning"], argument_rows(parser)), ""]
    if parser.epilog:
        parts += ["```text", parser.epilog.strip(), "```", ""]
    return "\n".join(parts)


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command of ``perfgate`` with its usage, arguments and examples."""
    if parser is None:
        from perfgate.cli import build_parser

        parser = build_parser()
    commands = subcommands(parser)
    helps = summaries(parser)
    parts = [cell(parser.description or ""), "", "```text", parser.format_usage().strip(), "```"]
    parts += ["", table(["command", "what it does"],
                        [[f"[`{n}`](#perfgate-{n})", cell(helps.get(n, ""))] for n in commands])]  # fmt: skip
    parts += ["", table(["argument", "meaning"], argument_rows(parser)), ""]
    for name, sub in commands.items():
        parts.append(command_section(f"perfgate {name}", sub, helps.get(name, "")))
    return "\n".join(parts)


# --- pytest options, ini settings, markers, hooks ------------------------------------------------
class RecordingParser:
    """Stands in for pytest's parser in a plugin's ``pytest_addoption``: records what it adds."""

    def __init__(self) -> None:
        self.ini: list[dict] = []
        self.groups: dict[str, tuple[str, list[tuple[tuple[str, ...], dict]]]] = {}

    def addini(self, name: str, help: str, type: str | None = None, default=None, **_) -> None:
        self.ini.append({"name": name, "help": help, "type": type or "string", "default": default})

    def getgroup(self, name: str, description: str = "", after: str | None = None):
        _, options = self.groups.setdefault(name, (description, []))
        return RecordingGroup(options)

    def addoption(self, *names: str, **attrs) -> None:
        self.getgroup("general").addoption(*names, **attrs)


class RecordingGroup:
    def __init__(self, options: list) -> None:
        self.options = options

    def addoption(self, *names: str, **attrs) -> None:
        self.options.append((names, attrs))


def recorded(addoption: Callable) -> RecordingParser:
    parser = RecordingParser()
    addoption(parser)
    return parser


def option_rows(options: list[tuple[tuple[str, ...], dict]]) -> list[list[str]]:
    rows = []
    for names, attrs in options:
        value = attrs.get("metavar") or ("{" + ",".join(attrs["choices"]) + "}"
                                         if attrs.get("choices") else None)  # fmt: skip
        takes_value = attrs.get("action") not in ("store_true", "store_false", "count")
        invocation = ", ".join(f"{n} {value}" if value and takes_value else n for n in names)
        if takes_value and not value:
            invocation = ", ".join(f"{n} {n.lstrip('-').upper().replace('-', '_')}" for n in names)
        meaning = attrs.get("help", "").replace("%%", "%")
        if "default" in attrs and attrs["default"] not in (None, [], False, ""):
            if "default" not in meaning:
                meaning += f" (default: {attrs['default']})"
        rows.append([f"`{invocation}`", cell(meaning)])
    return rows


def pytest_options_section(parser: RecordingParser) -> str:
    parts = []
    if parser.ini:
        rows = [[f"`{i['name']}`", cell(i["type"]), cell(i["help"])] for i in parser.ini]
        parts += ["### ini settings", "", table(["setting", "type", "meaning"], rows), ""]
    for name, (description, options) in parser.groups.items():
        parts += [f"### {cell(description or name)}", "", table(["option", "meaning"],
                  option_rows(options)), ""]  # fmt: skip
    return "\n".join(parts)


def plugin_reference() -> str:
    """perfgate's pytest options and ini settings, its markers and the hook a project implements."""
    import perfgate.hookspec
    import perfgate.plugin
    from perfgate.options import MARKERS

    parts = [pytest_options_section(recorded(perfgate.plugin.pytest_addoption))]
    parts += ["### Markers", ""]
    parts += [f"- `@pytest.mark.{cell(m.split(':', 1)[0])}`: {cell(m.split(':', 1)[1])}"
              for m in MARKERS]  # fmt: skip
    parts += ["", "### Hooks (implemented in a project's conftest.py)", ""]
    for name, function in inspect.getmembers(perfgate.hookspec, inspect.isfunction):
        if name.startswith("pytest_"):
            signature = f"{name}{inspect.signature(function)}"
            parts += [f"`{signature}`", ": " + cell(inspect.cleandoc(function.__doc__ or "")), ""]
    return "\n".join(parts)


def suite_reference() -> str:
    """The options of this repository's own suite (perf_tests/suite.py; imports torch)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from perf_tests import suite

    return pytest_options_section(recorded(suite.pytest_addoption))


def tox_reference() -> str:
    """Each tox environment of this repository with its description (tox.ini)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    rows = [[f"`tox -e {name.removeprefix('testenv:')}`", cell(tox[name].get("description", ""))]
            for name in tox.sections() if name.startswith("testenv:")]  # fmt: skip
    return table(["environment", "what it runs"], rows)


# --- exit codes ----------------------------------------------------------------------------------
def exit_codes_reference() -> str:
    """The exit statuses of a pytest session with perfgate, and of the perfgate command; the
    numbers come from the code's constants."""
    import pytest

    from perfgate.cli import INTERRUPTED
    from perfgate.cli.merge import MERGE_REFUSED
    from perfgate.session.baseline import GATE_NOT_RUN
    from perfgate.store.saving import SAVE_FAILED

    code = pytest.ExitCode
    command_error = 2  # perfgate/cli returns it as a literal (perfgate.cli.main)
    pytest_rows = [
        (code.OK, "every benchmark was gated or not gated with a reason, and none regressed"),
        (code.TESTS_FAILED, "a confirmed regression (or an ordinary failing test)"),
        (code.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); a run being saved is saved "
                           "first, or kept in `perfgate-results/unsaved/`"),  # fmt: skip
        (code.USAGE_ERROR, USAGE),
        (GATE_NOT_RUN, GATE_CANNOT_RUN),
        (SAVE_FAILED, "`--benchmark-save` could not save the run into the store (a full or "
                      "read-only disk, a folder that is not one): the line names the error and "
                      "the file in `perfgate-results/unsaved/` that holds the run"),  # fmt: skip
    ]
    command_rows = [
        (0, "done (`ab`, `bisect`, `nightly`: no regression; `bisect`: the first bad commit "
            "is named)"),  # fmt: skip
        (1, "`ab` or `nightly`: a case is a regression; `bisect`: BAD is not slower than GOOD"),
        (command_error, COMMAND_ERROR),
        (MERGE_REFUSED, "`merge` refuses its runs: another hardware key or commit, a case in "
                        "two shards, a shard missing or given twice, two splits, or a run that "
                        "is no shard"),  # fmt: skip
        (INTERRUPTED, "interrupted by Ctrl-C or SIGTERM: the git worktrees of `ab` and "
                      "`bisect` are removed; `dashboard` builds beside `--out` and swaps it in, "
                      "so the old site stays whole"),  # fmt: skip
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
    "file name, a `--perf-shard` that names no part (`0/2`, `2`), `-n` above the number of GPUs "
    "under `--device cuda`, an output path that cannot be written (`--perf-gate-report`, "
    "`--benchmark-json`, `--perf-profile`); without the gate, a missing `--perf-baselines` "
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
    "cannot be written; a failing block of `ab` (its pytest output is kept beside the JSON)"
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
    """Each verdict word, whether it counts as gated, and what the code says it means; then the
    rules behind them, per kind of measurement."""
    from perfgate.verdict.outcome import Verdict
    from perfgate.verdict.rules import RULES

    meanings = {name: comment for name, _, comment in constants(Verdict)}
    rows = [[f"`{v.value}`", "yes" if v.gated else "no", cell(meanings.get(v.name, ""))]
            for v in Verdict]  # fmt: skip
    parts = [table(["verdict", "gated", "meaning"], rows), "", "### The rules", ""]
    rule_rows = [[cell(measured), f"`{rule.name}`", cell(first_paragraph(type(rule).__doc__))]
                 for measured, rules in RULES.items() for rule in rules]  # fmt: skip
    parts.append(table(["measured", "rule", "fails when"], rule_rows))
    return "\n".join(parts)


# --- the stored run format -----------------------------------------------------------------------
def fields_reference() -> str:
    """Every field name perfgate stores, by the class of perfgate/fields.py that owns it."""
    from perfgate import fields

    parts = []
    for cls in (fields.RunField, fields.Field, fields.Declared, fields.Clock, fields.Gpu,
                fields.Profile, fields.Fact):  # fmt: skip
        rows = [[f"`{value}`", f"`{name}`", cell(comment)] for name, value, comment in
                constants(cls) if isinstance(value, str)]  # fmt: skip
        parts += [f"### {cls.__name__}", "", cell(first_paragraph(cls.__doc__)), ""]
        parts += [table(["stored as", "name in perfgate.fields", "meaning"], rows), ""]
    return "\n".join(parts)


SECTIONS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "pytest-plugin": plugin_reference,
    "pytest-suite": suite_reference,
    "tox": tox_reference,
    "exit-codes": exit_codes_reference,
    "verdicts": verdicts_reference,
    "fields": fields_reference,
}


def expand(markdown: str) -> str:
    """The page with each ``<!-- reference: NAME -->`` line replaced by its generated section;
    KeyError for a name no section has."""
    return MARKER.sub(lambda match: SECTIONS[match.group(1)](), markdown)


def on_page_markdown(markdown: str, **_) -> str:  # the MkDocs hook
    return expand(markdown)
