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
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- reference: ([\w-]+) -->$", re.MULTILINE)
sys.path.insert(0, str(ROOT / "tools"))  # MkDocs loads this file by its path

from docs_tables import (  # noqa: E402
    cell,
    exit_codes_reference,
    fields_reference,
    first_paragraph,
    gate_json_reference,
    table,
    verdicts_reference,
)


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
    parts += [
        "",
        table(
            ["command", "what it does"],
            [[f"[`{n}`](#perfgate-{n})", cell(helps.get(n, ""))] for n in commands],
        ),
    ]
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
        value = attrs.get("metavar") or (
            "{" + ",".join(attrs["choices"]) + "}" if attrs.get("choices") else None
        )
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
        parts += [
            f"### {cell(description or name)}",
            "",
            table(["option", "meaning"], option_rows(options)),
            "",
        ]
    return "\n".join(parts)


def plugin_reference() -> str:
    """perfgate's pytest options and ini settings, its markers and the hook a project implements."""
    import perfgate.hookspec
    import perfgate.plugin
    from perfgate.options import MARKERS

    parts = [pytest_options_section(recorded(perfgate.plugin.pytest_addoption))]
    parts += ["### Markers", ""]
    parts += [
        f"- `@pytest.mark.{cell(m.split(':', 1)[0])}`: {cell(m.split(':', 1)[1])}" for m in MARKERS
    ]
    parts += ["", "### Hooks (implemented in a project's conftest.py)", ""]
    for name, function in inspect.getmembers(perfgate.hookspec, inspect.isfunction):
        if name.startswith("pytest_"):
            signature = f"{name}{inspect.signature(function)}"
            parts += [f"`{signature}`", ": " + cell(inspect.cleandoc(function.__doc__ or "")), ""]
    return "\n".join(parts)


def suite_reference() -> str:
    """The options of this repository's own suite (perf_tests/options.py, no torch needed)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from perf_tests import options

    return pytest_options_section(recorded(options.add))


def tox_reference() -> str:
    """Each tox environment of this repository with its description (tox.ini)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    rows = [
        [f"`tox -e {name.removeprefix('testenv:')}`", cell(tox[name].get("description", ""))]
        for name in tox.sections()
        if name.startswith("testenv:")
    ]
    return table(["environment", "what it runs"], rows)


# --- the layout of perfgate/ (each module's docstring) -------------------------------------------
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def summary_line(path: Path) -> str:
    """The first sentence of a module's docstring: its line on the layout page. ValueError for a
    module without one, so that the build names it."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if not doc:
        raise ValueError(f"{path}: no docstring (its first sentence is its line in the layout)")
    return SENTENCE_END.split(" ".join(first_paragraph(doc).split()), maxsplit=1)[0]


def layout_reference(package: Path = ROOT / "perfgate") -> str:
    """Every module of the harness, folder by folder, with the first sentence of its docstring: a
    folder's own sentence is its ``__init__.py``'s."""
    parts = []
    folders = sorted({path.parent for path in package.rglob("*.py")})  # the package first
    for folder in folders:
        name = folder.relative_to(package.parent).as_posix()
        parts += [f"### `{name}/`", ""]
        if (folder / "__init__.py").is_file():
            parts += [cell(summary_line(folder / "__init__.py")), ""]
        modules = [path for path in sorted(folder.glob("*.py")) if path.name != "__init__.py"]
        rows = [[f"`{path.name}`", cell(summary_line(path))] for path in modules]
        parts += [table(["module", "what it is"], rows), ""] if rows else []
    return "\n".join(parts)


SECTIONS: dict[str, Callable[[], str]] = {
    "layout": layout_reference,
    "cli": cli_reference,
    "pytest-plugin": plugin_reference,
    "pytest-suite": suite_reference,
    "tox": tox_reference,
    "exit-codes": exit_codes_reference,
    "verdicts": verdicts_reference,
    "fields": fields_reference,
    "gate-json": gate_json_reference,
}


def expand(markdown: str) -> str:
    """The page with each ``<!-- reference: NAME -->`` line replaced by its generated section;
    KeyError for a name no section has."""
    return MARKER.sub(lambda match: SECTIONS[match.group(1)](), markdown)


def on_page_markdown(markdown: str, **_) -> str:  # the MkDocs hook
    return expand(markdown)
