"""The release workflow: valid under GitHub's schema and actionlint; it builds the sdist and the
wheel and checks them with twine on every run, and publishes only for a tag, by trusted
publishing (an OIDC token, no stored password), from a job that holds nothing else."""

from __future__ import annotations

from pathlib import Path

import yaml
from workflows import FULL_SHA, check_jsonschema, tox_environments

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_it_builds_and_checks_on_a_tag_or_by_hand():
    assert set(workflow()[True]) == {"push", "workflow_dispatch"}  # YAML reads `on` as True
    assert workflow()[True]["push"] == {"tags": ["v*"]}
    build = workflow()["jobs"]["build"]
    runs = "\n".join(step.get("run", "") for step in build["steps"])
    assert "python -m build" in runs and "twine check --strict dist/*" in runs
    checkout = build["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0  # the tags, for the version


def test_only_a_tag_publishes_by_trusted_publishing_with_the_least_token():
    jobs = workflow()["jobs"]
    assert workflow()["permissions"] == {}
    assert jobs["build"]["permissions"] == {"contents": "read"}
    publish = jobs["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    [upload] = [s for s in publish["steps"] if s["uses"].startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in upload  # no password: trusted publishing


def test_every_action_is_pinned_and_every_job_has_a_timeout():
    for name, job in workflow()["jobs"].items():
        assert 0 < job.get("timeout-minutes", 0) <= 60, f"job {name} has no timeout"
        for step in job["steps"]:
            if "uses" in step:
                assert FULL_SHA.match(step["uses"]), f"{step['uses']} is not pinned to a commit"


def test_lint_checks_it():
    assert "release.yml" in tox_environments()["lint"]


def test_release_workflow_matches_githubs_schema():
    result = check_jsonschema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_accepts_the_release_workflow(actionlint):
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
