"""The nightly GPU workflow must call tox environments that exist, with the gate on."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tox_environments() -> dict[str, str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return {
        section.removeprefix("testenv:"): tox[section].get("commands", "")
        for section in tox.sections()
        if section.startswith("testenv:")
    }


def test_nightly_workflow_calls_an_existing_tox_environment_that_gates():
    workflow = (ROOT / ".github" / "workflows" / "nightly-gpu.yml").read_text()
    called = re.findall(r"tox -e ([\w-]+)", workflow)
    environments = tox_environments()
    assert called, "the workflow calls no tox environment"
    for name in called:
        assert name in environments, f"workflow calls tox -e {name}, which tox.ini lacks"
        assert "--perf-gate" in environments[name]


def test_ci_runs_the_readme_test_command():
    readme_commands = re.findall(
        r"^(python3 -m pip install tox && tox -e \w+)",
        (ROOT / "README.md").read_text(),
        flags=re.MULTILINE,
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert any(command in ci and "tests" in command for command in readme_commands)
