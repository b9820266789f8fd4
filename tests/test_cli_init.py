"""``perfgate init`` turns perfgate on in the configuration pytest reads, without breaking it: a
pyproject.toml that already has ``[tool.pytest.ini_options]`` (where appending a second one is
an error pytest cannot read past) keeps its comments and order, and so do INI files."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
from helpers import perfgate

tomllib = pytest.importorskip("tomllib")

PYPROJECT = """\
[project]
name = "demo"  # the distribution's name

[tool.pytest.ini_options]
# the benchmarks live beside the tests
testpaths = ["tests"]
addopts = "-q"

[tool.ruff]
line-length = 100
"""


def init(folder: Path) -> tuple[int, str, str]:
    return perfgate("init", "--dir", str(folder))


def test_init_adds_the_key_to_an_existing_table_keeping_its_comment_and_order(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT)
    status, out, err = init(tmp_path)
    assert status == 0, err
    assert out == (
        f"perfgate init: added perfgate = true in [tool.pytest.ini_options] of {pyproject}\n"
    )
    text = pyproject.read_text()
    config = tomllib.loads(text)  # still valid: one table, not two
    assert config["tool"]["pytest"]["ini_options"] == {
        "testpaths": ["tests"], "addopts": "-q", "perfgate": True,
    }  # fmt: skip
    assert text == PYPROJECT.replace('"-q"\n', '"-q"\nperfgate = true\n')  # all else as it was
    assert "# the benchmarks live beside the tests" in text


def test_init_twice_changes_nothing_the_second_time(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    init(tmp_path)
    after_first = (tmp_path / "pyproject.toml").read_text()
    status, out, _ = init(tmp_path)
    assert status == 0 and "already on" in out
    assert (tmp_path / "pyproject.toml").read_text() == after_first


def test_init_creates_the_table_in_a_pyproject_without_one(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.ruff]  # lint\nline-length = 100\n")
    assert init(tmp_path)[0] == 0
    config = tomllib.loads(pyproject.read_text())
    assert config["tool"] == {
        "ruff": {"line-length": 100},
        "pytest": {"ini_options": {"perfgate": True}},
    }
    assert pyproject.read_text().startswith("[tool.ruff]  # lint\nline-length = 100\n")


@pytest.mark.parametrize(
    ("name", "section"),
    [("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"), ("pytest.ini", "pytest")],
)
def test_init_adds_one_line_under_an_ini_files_pytest_section_found_above(tmp_path, name, section):
    before = f"; settings\n[other]\nkey = 1\n\n[{section}]  ; pytest's\naddopts = -q\n"
    (tmp_path / name).write_text(before)
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")  # pytest reads the INI file first
    below = tmp_path / "sub"
    below.mkdir()
    assert init(below)[0] == 0
    after = (tmp_path / name).read_text()
    assert after == before.replace("pytest's\n", "pytest's\nperfgate = true\n")
    parser = configparser.RawConfigParser()
    parser.read_string(after)
    assert parser.getboolean(section, "perfgate")
    assert (tmp_path / "pyproject.toml").read_text() == "[tool.ruff]\n"


def test_init_writes_a_pytest_ini_where_there_is_no_configuration(tmp_path):
    assert init(tmp_path)[0] == 0
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\nperfgate = true\n"


def test_init_refuses_in_one_line_where_perfgate_is_off_or_the_file_is_broken(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    off = "[tool.pytest.ini_options]\nperfgate = false\n"
    pyproject.write_text(off)
    status, out, err = init(tmp_path)
    assert status == 2 and not out
    assert err == (
        f"perfgate init: error: {pyproject} sets perfgate = false in "
        "[tool.pytest.ini_options]: change it to true there\n"
    )
    assert pyproject.read_text() == off
    pyproject.write_text("[tool.pytest.ini_options\n")
    status, _, err = init(tmp_path)
    assert status == 2 and err.count("\n") == 1 and "cannot read" in err
    assert "Traceback" not in err
