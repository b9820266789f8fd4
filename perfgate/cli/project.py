"""The project's own pytest configuration, as a command outside pytest reads it: the first ini file
pytest would take from the working folder up (pytest.ini, .pytest.ini, pyproject.toml with
[tool.pytest.ini_options], tox.ini with [pytest], setup.cfg with [tool:pytest]), and a setting of
it. The plugin reads the same settings through pytest itself (``config.getini``)."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before Python 3.11
    import tomli as tomllib

SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}


def _settings(path: Path) -> dict[str, str] | None:
    """The pytest settings of one candidate file; None when it holds none (pytest goes on up)."""
    if path.name == "pyproject.toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return None
        found = data.get("tool", {}).get("pytest", {}).get("ini_options")
        return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error):
        return None
    section = SECTIONS[path.name]
    if parser.has_section(section):
        return dict(parser[section])
    return {} if path.name in ("pytest.ini", ".pytest.ini") else None  # these match when empty


def ini_file(start: Path | None = None) -> tuple[Path, dict[str, str]] | None:
    """(the ini file pytest would read, its settings) from ``start`` (the working folder) up."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            if (folder / name).is_file() and (found := _settings(folder / name)) is not None:
                return folder / name, found
    return None


def setting_path(name: str, start: Path | None = None) -> Path | None:
    """A path setting of the project's ini file, relative to the file's folder; None unset."""
    found = ini_file(start)
    if found is None or not found[1].get(name):
        return None
    path, settings = found
    return (path.parent / Path(settings[name]).expanduser()).resolve()
