"""The pull-request workflow: valid under GitHub's schema and actionlint, the least token it
needs, the base branch counted on the runner and the pull request gated against it, the job
failing when the gate fails, and one comment, created and then updated in place (its steps'
own shell scripts run here, with a stand-in for the `gh` command)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflows import FULL_SHA, check_jsonschema, tox_environments

from perfgate.report import comment as pr_comment

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "pr-instructions.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def step(job: str, text: str) -> dict:
    """The one step of ``job`` whose name or run: holds ``text``."""
    steps = workflow()["jobs"][job]["steps"]
    matches = [s for s in steps if text in s.get("run", "") or text in s.get("name", "")]
    assert len(matches) == 1, f"expected one step of {job} with {text!r}, found {len(matches)}"
    return matches[0]


def test_it_runs_on_every_pull_request_without_the_targets_token():
    triggers = workflow()[True]  # YAML reads the key `on` as True
    assert list(triggers) == ["pull_request"]  # never pull_request_target: it runs PR code


def test_each_job_holds_only_the_permission_it_needs():
    jobs = workflow()["jobs"]
    assert workflow()["permissions"] == {}
    assert jobs["gate"]["permissions"] == {"contents": "read"}
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert set(jobs) == {"gate", "comment"}


def test_the_job_that_can_write_runs_none_of_the_pull_requests_code():
    steps = workflow()["jobs"]["comment"]["steps"]
    assert not any(s.get("uses", "").startswith("actions/checkout@") for s in steps)
    assert not any(re.search(r"\b(python3?|tox|pytest|pip)\b", s.get("run", "")) for s in steps)


def test_a_fork_gets_no_comment_job_and_a_failed_gate_still_gets_its_comment():
    condition = workflow()["jobs"]["comment"]["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition
    assert condition.startswith("always()") and "needs.gate.result != 'cancelled'" in condition


def test_every_action_is_pinned_and_every_job_has_a_timeout():
    jobs = workflow()["jobs"]
    for name, job in jobs.items():
        assert 0 < job.get("timeout-minutes", 0) <= 120, f"job {name} has no timeout"
        for s in job["steps"]:
            if "uses" in s:
                assert FULL_SHA.match(s["uses"]), f"{s['uses']} is not pinned to a commit"


def test_the_base_branch_is_counted_here_and_the_pull_request_gated_against_it():
    base = step("gate", "The base branch's tree")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert base["with"]["path"] == "base"
    count = step("gate", "Count the base branch's tree")
    assert count["working-directory"] == "base"
    for argument in (
        "--perf-measure instructions",
        "--benchmark-save=base",
        "PYTHONPATH=",
        '--perf-baselines "$RUNNER_TEMP/baselines"',
    ):
        assert argument in count["run"]
    gate = step("gate", "tox run -e instructions -- --perf-baselines")
    assert gate["working-directory"] == "pr"
    assert '--perf-baselines "$RUNNER_TEMP/baselines"' in gate["run"]
    commands = tox_environments()["instructions"]
    assert "--perf-measure instructions --perf-gate" in commands
    assert "--perf-gate-report {toxinidir}/perfgate-results/gate.md" in commands
    assert "pr/perfgate-results/gate.json" in step("gate", "perfgate comment")["run"]


def test_the_gate_step_fails_the_job_when_the_gate_fails():
    gate = step("gate", "tox run -e instructions -- --perf-baselines")
    assert not gate.get("continue-on-error", False)
    assert not re.search(r"\|\|\s*(true|:)|set \+e", gate["run"])
    for later in ("perfgate comment", "Upload the comment"):
        assert step("gate", later)["if"] == "always()"


def test_the_workflow_matches_githubs_schema():
    result = check_jsonschema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_accepts_the_workflow(actionlint):
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env}
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_comment_step_writes_the_body_from_the_gates_files(tmp_path):
    results = tmp_path / "pr" / "perfgate-results"
    results.mkdir(parents=True)
    python = tmp_path / "pr" / ".tox" / "instructions" / "bin" / "python"  # the gate's environment
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    rows = [{"name": "t.py::test_a", "verdict": "unchanged", "message": "same"}]
    (results / "gate.json").write_text(json.dumps(rows))
    summary = tmp_path / "summary.md"
    done = bash(
        step("gate", "perfgate comment")["run"],
        tmp_path,
        PYTHONPATH=str(ROOT),
        BASE="a" * 40,
        HEAD="b" * 40,
        RUN_URL="https://ci/1",
        GITHUB_STEP_SUMMARY=str(summary),
    )
    assert done.returncode == 0, done.stderr
    body = (tmp_path / "comment" / "comment.md").read_text()
    assert body.startswith(pr_comment.MARKER) and "no regression** (1 unchanged)" in body
    assert summary.read_text() == body


FAKE_GH = """#!{python}
import json, sys
from pathlib import Path
state = Path({state!r})
comments = json.loads(state.read_text())
args = sys.argv[1:]
if "--method" not in args:  # gh api --paginate repos/R/issues/N/comments: two pages
    print(json.dumps(comments[:1]) + json.dumps(comments[1:]))
    sys.exit(0)
method, url = args[args.index("--method") + 1], args[args.index("--method") + 2]
body = json.load(sys.stdin)["body"]
if method == "POST":
    comments.append({{"id": 100 + len(comments), "user": {{"login": "github-actions[bot]"}},
                     "body": body, "url": url}})
else:
    target = int(url.rsplit("/", 1)[1])
    next(c for c in comments if c["id"] == target)["body"] = body
state.write_text(json.dumps(comments))
"""


@pytest.fixture
def github(tmp_path: Path):
    """A stand-in for the `gh` command, keeping the pull request's comments in a file."""
    if subprocess.run(["which", "jq"], capture_output=True).returncode != 0:
        pytest.skip("the comment step uses jq (GitHub's runners have it)")
    state = tmp_path / "comments.json"
    someone = {"id": 7, "user": {"login": "someone"}, "body": pr_comment.MARKER + "\nquoted"}
    state.write_text(json.dumps([someone]))
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir()
    gh.write_text(FAKE_GH.format(python=sys.executable, state=str(state)))
    gh.chmod(0o755)
    path = f"{gh.parent}{os.pathsep}{os.environ['PATH']}"

    def post(body: str) -> list[dict]:
        (tmp_path / "comment").mkdir(exist_ok=True)
        (tmp_path / "comment" / "comment.md").write_text(body)
        script = step("comment", "gh api")["run"]
        done = bash(script, tmp_path, PATH=path, GH_TOKEN="t", REPO="o/r", PR="5")
        assert done.returncode == 0, done.stderr
        return json.loads(state.read_text())

    return post


def test_the_comment_is_created_once_then_updated_in_place(github):
    first = pr_comment.MARKER + "\n**first**\n"
    comments = github(first)
    ours = [c for c in comments if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"] == first
    assert ours[0]["url"] == "repos/o/r/issues/5/comments"
    second = pr_comment.MARKER + "\n**second**\n"
    comments = github(second)
    ours = [c for c in comments if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"] == second  # the same comment, updated
    assert ours[0]["id"] == 101
    assert next(c for c in comments if c["id"] == 7)["body"].endswith("quoted")  # not ours


# --- time, on the pull requests that ask for it ---------------------------------------------------
LABEL = "contains(github.event.pull_request.labels.*.name, 'perf-time')"


def test_time_is_checked_across_the_two_trees_where_the_label_asks():
    base = step("gate", "the base branch's tree timed here")
    assert base["if"] == LABEL and base["working-directory"] == "base"
    assert '--perf-baselines "$RUNNER_TEMP/time-baselines"' in base["run"]
    assert "--benchmark-save=base" in base["run"] and "--perf-measure" not in base["run"]
    check = step("gate", "perfgate check --base-ref")
    assert check["if"] == LABEL and check["working-directory"] == "pr"
    assert '--perf-baselines "$RUNNER_TEMP/time-baselines"' in check["run"]
    assert "--results perfgate-results/time" in check["run"]
    assert not re.search(r"\|\|\s*(true|:)|set \+e", check["run"])  # a time regression fails
    pr = step("gate", "The pull request's tree")
    assert pr["with"]["fetch-depth"] == 0  # the A/B needs the base commit
    assert "perfgate-results/time/nightly-gate.json" in step("gate", "perfgate comment")["run"]


def test_the_comment_has_a_section_on_time_where_the_label_asked(tmp_path):
    results = tmp_path / "pr" / "perfgate-results"
    (results / "time").mkdir(parents=True)
    python = tmp_path / "pr" / ".tox" / "instructions" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    (results / "gate.json").write_text(
        json.dumps([{"name": "t.py::test_a", "verdict": "unchanged", "message": "same"}])
    )
    timed = [{"name": "t.py::test_b", "verdict": "undecided", "message": "undecided: +2.6%"},
             {"name": "t.py::test_c", "verdict": "unchanged", "message": "inside"}]  # fmt: skip
    (results / "time" / "nightly-gate.json").write_text(json.dumps({"format": 1, "rows": timed}))
    for label, shown in (("true", True), ("false", False)):
        done = bash(step("gate", "perfgate comment")["run"], tmp_path, PYTHONPATH=str(ROOT),
                    BASE="a" * 40, HEAD="b" * 40, RUN_URL="https://ci/1", TIMED=label,
                    GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))  # fmt: skip
        assert done.returncode == 0, done.stderr
        body = (tmp_path / "comment" / "comment.md").read_text()
        assert ("**:warning: Time: no regression, 1 undecided**" in body) == shown, body
        assert ("t.py::test\\_b" in body or "t.py::test_b" in body) == shown
