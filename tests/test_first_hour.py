"""What a new user meets first: the main command (tox -e perf) asks for the gate's verdicts, the
product's text speaks of the product (not of where or by whom it was built), and the
documentation site loads nothing from outside itself (it works offline)."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# words of the places and sessions the product was built in, which its text must not carry
# (docs/gate-validation/ is the evidence behind the claims, and keeps its names)
NOT_PRODUCT = re.compile(r"this workplace|session [0-9]+|2-core VM|issue [0-9]+", re.IGNORECASE)
PRODUCT_TEXT = ("README.md", "docs/guides", "docs/reference", "docs/index.md", "pyproject.toml")
# a page that loads a script or a stylesheet from elsewhere (a CDN) does not work offline
OUTSIDE = re.compile(
    r"<script[^>]*\ssrc=\"(?:https?:)?//|<link[^>]*\shref=\"(?:https?:)?//[^\"]*\"[^>]*stylesheet"
    r"|<link[^>]*stylesheet[^>]*\shref=\"(?:https?:)?//",
    re.IGNORECASE,
)


def perf_command() -> list[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return shlex.split(tox["testenv:perf"]["commands"].replace("{posargs}", ""))


def test_the_perf_environment_asks_for_the_gate_and_saves_a_first_baseline():
    command = perf_command()
    assert command[:2] == ["pytest", "perf_tests"], command
    assert "--perf-gate" in command  # a verdict word for every case, exit 1 on a regression
    assert "--perf-first-baseline" in command  # no baseline here yet: saved, said, exit 0
    assert not any(arg.startswith("--benchmark-save") for arg in command)  # nothing else saved


def product_lines() -> list[str]:
    """Each line of the product's text that names a place or a session, as 'path:line: text'."""
    found = []
    for name in PRODUCT_TEXT:
        path = ROOT / name
        files = sorted(path.rglob("*.md")) if path.is_dir() else [path]
        for file in files:
            for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                if NOT_PRODUCT.search(line):
                    found.append(f"{file.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_the_products_text_names_no_session_issue_or_machine_it_was_built_on():
    assert product_lines() == []


def test_the_package_describes_the_product():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["description"].startswith("A performance regression gate for pytest-benchmark")
    assert project["dynamic"] == ["version"]  # from the git tag (setuptools-scm)


def test_the_check_finds_a_session_named_in_the_text():
    assert NOT_PRODUCT.search("measured in Session 13 on the 2-core VM")
    assert not NOT_PRODUCT.search("the gate re-runs a case in the same session")


@pytest.mark.slow
def test_the_site_builds_strictly_and_loads_no_script_or_stylesheet_from_outside(tmp_path):
    site = tmp_path / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    outside = [
        f"{page.relative_to(site)}: {match.group(0)}"
        for page in pages
        for match in OUTSIDE.finditer(page.read_text(encoding="utf-8"))
    ]
    assert outside == []
    api = (site / "reference" / "api.html").read_text(encoding="utf-8")
    assert 'id="perfgate.measure.timing.time_wall"' in api and "Ratio" in api
    assert "Unreleased" in (site / "changelog.html").read_text(encoding="utf-8")
    highlighted = (site / "guides" / "gate-your-project.html").read_text(encoding="utf-8")
    assert '<div class="highlight">' in highlighted  # by Pygments, at build time


def test_the_outside_check_finds_a_cdn_script_and_stylesheet():
    assert OUTSIDE.search('<script src="https://cdnjs.cloudflare.com/x.js"></script>')
    assert OUTSIDE.search('<link rel="stylesheet" href="https://cdn.example/x.css">')
    assert OUTSIDE.search('<link href="//cdn.example/x.css" rel="stylesheet">')
    assert not OUTSIDE.search('<link rel="stylesheet" href="css/pygments.css">')
