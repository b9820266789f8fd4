"""``perfgate init``: turn perfgate on for a project (``perfgate = true``) in the configuration
file that pytest itself reads, edited in place and nothing else changed.

The file is found as pytest finds it: in the folder, then in each folder above it, the first of
``CONFIG_NAMES`` that holds a pytest section; where none does, the nearest pyproject.toml gets a
``[tool.pytest.ini_options]`` table; where there is none either, a new pytest.ini is written. A
TOML file is edited through tomlkit, which keeps its comments, order and layout; an INI file
(pytest.ini, tox.ini, setup.cfg) gets one line under its section's header.

Exit status: 0 when perfgate is on (added, or already on); 2 with one line where the file cannot
be edited (unreadable, not valid TOML or INI, or perfgate set to another value there).
"""

from __future__ import annotations

import argparse
import configparser
import re
from pathlib import Path

from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError

KEY = "perfgate"
# pytest's own order of configuration files; an INI file's pytest section
CONFIG_NAMES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
INI_SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}
EXAMPLES = """\
  perfgate init                 # in the project's folder: perfgate = true where pytest reads it
  perfgate init --dir ../other  # another project's"""


class Init(Command):
    name = "init"
    summary = "turn perfgate on for a project: perfgate = true in its pytest configuration"
    description = (
        "Add perfgate = true to the pytest configuration that pytest reads for this folder "
        "(pytest.toml, pytest.ini, pyproject.toml's [tool.pytest.ini_options], tox.ini's "
        "[pytest], setup.cfg's [tool:pytest]), keeping the file's comments and order; with none, "
        "to the nearest pyproject.toml, else a new pytest.ini."
    )
    examples = EXAMPLES

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--dir",
            type=Path,
            default=Path("."),
            help="the project's folder (default: the current one)",
        )

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        path, section = config_file(args.dir.resolve())
        added = (edit_toml if path.suffix == ".toml" else edit_ini)(path, section)
        print(
            f"perfgate init: {'added' if added else 'already on:'} perfgate = true in "
            f"[{section}] of {path}",
            file=out,
        )
        return 0


def config_file(folder: Path) -> tuple[Path, str]:
    """(the file pytest reads for ``folder``, its pytest section); a file to create where none."""
    nearest_pyproject = None
    for base in (folder, *folder.parents):
        for name in CONFIG_NAMES:
            path = base / name
            if not path.is_file():
                continue
            section = section_of(path)
            if section is not None:
                return path, section
            if name == "pyproject.toml" and nearest_pyproject is None:
                nearest_pyproject = path
    if nearest_pyproject is not None:
        return nearest_pyproject, "tool.pytest.ini_options"
    return folder / "pytest.ini", "pytest"


def section_of(path: Path) -> str | None:
    """The pytest section of a configuration file, None where it has none (pytest.ini always
    has one for pytest, empty or not)."""
    if path.suffix == ".toml":
        document = read_toml(path)
        if path.name != "pyproject.toml":
            return "pytest"
        tool_pytest = document.get("tool", {}).get("pytest", {})
        if "ini_options" in tool_pytest:
            return "tool.pytest.ini_options"
        return "tool.pytest" if tool_pytest else None
    wanted = INI_SECTIONS[path.name]
    if path.name in ("pytest.ini", ".pytest.ini"):
        return wanted
    return wanted if wanted in read_ini(path).sections() else None


def read_toml(path: Path):
    """The TOML document of ``path`` (tomlkit's, imported here: only ``init`` needs it)."""
    import tomlkit
    import tomlkit.exceptions

    try:
        return tomlkit.parse(read_text(path))
    except tomlkit.exceptions.TOMLKitError as error:
        raise CommandError(f"cannot read {path}: {error}; fix it, then run perfgate init") from None


def read_ini(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(read_text(path), str(path))
    except configparser.Error as error:
        problem = str(error).splitlines()[0]
        raise CommandError(
            f"cannot read {path}: {problem}; fix it, then run perfgate init"
        ) from None
    return parser


def already(path: Path, section: str, value: object) -> bool:
    """True where perfgate is on already; CommandError where it is set to something else."""
    if str(value).strip().lower() in ("true", "1", "yes", "on"):
        return True
    shown = str(value).lower() if isinstance(value, bool) else value  # as TOML writes it
    raise CommandError(f"{path} sets {KEY} = {shown} in [{section}]: change it to true there")


def edit_toml(path: Path, section: str) -> bool:
    """Add ``perfgate = true`` to the table ``section`` (created where absent); False where it
    was on already."""
    import tomlkit

    document = read_toml(path) if path.exists() else tomlkit.document()
    table = document
    for name in section.split("."):
        if name not in table:
            table[name] = tomlkit.table(is_super_table=name != section.split(".")[-1])
        table = table[name]
    if KEY in table:
        return not already(path, section, table[KEY])
    table[KEY] = True
    write(path, tomlkit.dumps(document))
    return True


def edit_ini(path: Path, section: str) -> bool:
    """Add ``perfgate = true`` as the first line under ``[section]`` (the file written where
    absent); every other line stays as it was. False where it was on already."""
    if not path.exists():
        write(path, f"[{section}]\n{KEY} = true\n")
        return True
    parser = read_ini(path)
    if parser.has_section(section) and parser.has_option(section, KEY):
        return not already(path, section, parser.get(section, KEY))
    text = read_text(path)
    header = re.compile(
        rf"^\[{re.escape(section)}\][ \t]*([#;][^\r\n]*)?(?=\r?$)", re.MULTILINE
    ).search(text)
    newline = "\r\n" if "\r\n" in text else "\n"
    if header is None:  # a pytest.ini without its section (pytest reads nothing of it either)
        text += ("" if text.endswith("\n") or not text else newline) + f"[{section}]{newline}"
        text += f"{KEY} = true{newline}"
    else:
        text = text[: header.end()] + f"{newline}{KEY} = true" + text[header.end() :]
    write(path, text)
    return True


def read_text(path: Path) -> str:
    """The file's text as it is on disk (its line endings kept); CommandError where unreadable."""
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"cannot read {path}: {error}; fix it, then run perfgate init") from None


def write(path: Path, text: str) -> None:
    try:
        path.write_bytes(text.encode("utf-8"))
    except OSError as error:
        raise CommandError(
            f"cannot write {path}: {error.strerror}; add {KEY} = true there yourself"
        ) from None
