"""The nightly GPU workflow: valid YAML, valid against GitHub's workflow schema, clean under
actionlint, and a job that fails when the gate fails and always publishes what the gate wrote."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflows import FULL_SHA, check_jsonschema, tox_environments

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-gpu.yml"
# The workflow as it was until the YAML check came: line 22 has an unquoted ": " inside `run:`.
UNQUOTED_COLON = Path(__file__).parent / "data" / "nightly-gpu-unquoted-colon.yml"


def load_workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps(job: str | None = "gate") -> list[dict]:
    """The steps of one job (default: the one-runner gate), or of every job (None)."""
    jobs = load_workflow()["jobs"]
    return [step for name in ([job] if job else jobs) for step in jobs[name]["steps"]]


def step_running(text: str, job: str = "gate") -> dict:
    matches = [step for step in steps(job) if text in step.get("run", "")]
    assert len(matches) == 1, f"expected one step whose run: holds {text!r}, found {len(matches)}"
    return matches[0]


def step_using(action: str, job: str = "gate") -> dict:
    matches = [step for step in steps(job) if step.get("uses", "").startswith(action + "@")]
    assert len(matches) == 1, f"expected one step that uses {action}, found {len(matches)}"
    return matches[0]


def test_workflow_is_valid_yaml_with_jobs():
    assert load_workflow()["jobs"], "the workflow defines no job"


def test_yaml_parser_rejects_the_old_unquoted_colon():
    with pytest.raises(yaml.YAMLError, match="mapping values are not allowed"):
        yaml.safe_load(UNQUOTED_COLON.read_text())


def test_token_can_only_read_the_repository():
    workflow = load_workflow()
    assert workflow["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in workflow["jobs"].values())


def test_one_nightly_at_a_time_and_a_running_gate_is_never_cancelled():
    concurrency = load_workflow()["concurrency"]
    assert concurrency["group"]
    assert concurrency.get("cancel-in-progress") is False


def test_every_job_has_a_timeout():
    for name, job in load_workflow()["jobs"].items():
        assert 0 < job.get("timeout-minutes", 0) <= 120, f"job {name} has no sensible timeout"


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it():
    uses = [step["uses"] for step in steps(None) if "uses" in step]
    assert uses
    lines = WORKFLOW.read_text().splitlines()
    for action in uses:
        assert FULL_SHA.match(action), f"{action} is not pinned to a full commit SHA"
        line = next(line for line in lines if action in line)
        assert re.search(r"# v\d+\.\d+\.\d+$", line), f"{action}: say its version in a comment"


def test_gate_step_fails_the_job_when_the_gate_fails():
    gate = step_running("tox -e gpu-nightly")
    environment = re.search(r"tox -e ([\w-]+)", gate["run"]).group(1)
    commands = tox_environments().get(environment)
    assert commands is not None, f"workflow calls tox -e {environment}, which tox.ini lacks"
    assert "python -m perfgate nightly" in commands  # the stored comparison, then the A/B
    # tox's exit status is the step's: nothing may swallow it
    assert not gate.get("continue-on-error", False)
    assert not re.search(r"\|\|\s*(true|:)|set \+e", gate["run"])


def test_gate_writes_its_summary_and_json_where_the_workflow_publishes_them():
    from perfgate.ab.night import NightlyOptions, stored_comparison_command

    commands = tox_environments()["gpu-nightly"]
    assert "--results {toxinidir}/perfgate-results" in commands
    assert re.search(
        r"--tests perf_tests \{posargs\} -- \\\s+--device cuda --perf-tier full", commands
    )
    command = stored_comparison_command(NightlyOptions(results=Path("perfgate-results")))
    assert "--perf-gate" in command and "--perf-gate-report=perfgate-results/gate.md" in command
    assert "--benchmark-json=perfgate-results/nightly.json" in command


def test_the_ab_can_check_out_the_baselines_commit():
    checkout = step_using("actions/checkout")
    assert checkout["with"]["fetch-depth"] == 0  # a shallow clone lacks the baseline's commit


def test_the_dashboard_of_tonights_run_is_built_and_uploaded_whatever_the_gate_did():
    dashboard = step_running("tox -e dashboard")
    assert dashboard["if"].startswith("always()")
    assert "perfgate-results/nightly.json" in dashboard["run"]
    assert "--out perfgate-results/dashboard" in dashboard["run"]  # inside the uploaded folder
    assert "dashboard" in tox_environments()


@pytest.mark.parametrize("gate_ran", [True, False])
def test_the_dashboard_step_puts_the_nights_regressions_on_the_job_page(tmp_path, gate_ran):
    """The step's own shell script, with `tox -e dashboard --` standing for perfgate dashboard."""
    pytest.importorskip("plotly")
    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import STEPPED, write_history

    folder = write_history(tmp_path / "baselines", runs=14, step_at=11)
    results = tmp_path / "perfgate-results"
    results.mkdir()
    shutil.move(folder / "0014_nightly.json", results / "nightly.json")
    if gate_ran:
        name = f"perf_tests/test_synthetic.py::{STEPPED}"
        row = {"name": name, "verdict": "regression", "message": "slower", "change_percent": 5.0}
        (results / "gate.json").write_text(json.dumps([row]))
    tox = tmp_path / "bin" / "tox"
    tox.parent.mkdir()
    tox.write_text(f'#!/bin/sh\nshift 3\nexec {sys.executable} -m perfgate dashboard "$@"\n')
    tox.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {**os.environ, "PATH": f"{tox.parent}{os.pathsep}{os.environ['PATH']}",
           "GITHUB_STEP_SUMMARY": str(summary), "PYTHONPATH": str(ROOT)}  # fmt: skip
    script = step_running("tox -e dashboard")["run"].rstrip() + " --baselines baselines"
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert ("Confirmed regressions" in text) is gate_ran
    assert "New steps in the benchmark history" in text or "No new step" in text


def test_summary_and_upload_run_whatever_the_gate_did():
    summary = step_running("cat perfgate-results/gate.md")
    assert summary["if"] == "always()"
    assert "cat perfgate-results/nightly.md" in summary["run"]  # the night's verdicts first
    upload = step_using("actions/upload-artifact")
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "perfgate-results/"


def test_ci_runs_the_readme_test_command():
    readme_commands = re.findall(
        r"^(python3 -m pip install tox && tox -e \w+)",
        (ROOT / "README.md").read_text(),
        flags=re.MULTILINE,
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert any(command in ci and "tests" in command for command in readme_commands)


def with_unknown_permission_level(tmp_path: Path) -> Path:
    text = WORKFLOW.read_text()
    assert "contents: read" in text
    broken = tmp_path / "nightly-gpu.yml"
    broken.write_text(text.replace("contents: read", "contents: reed"))
    return broken


def test_workflow_matches_githubs_schema():
    result = check_jsonschema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path: Path):
    assert check_jsonschema(UNQUOTED_COLON).returncode != 0
    result = check_jsonschema(with_unknown_permission_level(tmp_path))
    assert result.returncode != 0 and "reed" in result.stdout


def test_actionlint_accepts_the_workflow(actionlint):
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_workflow(actionlint, tmp_path: Path):
    result = actionlint(UNQUOTED_COLON)
    assert result.returncode == 1 and "invalid YAML" in result.stdout
    result = actionlint(with_unknown_permission_level(tmp_path))
    assert result.returncode == 1 and "reed" in result.stdout


# --- the sharded nightly: N GPU runners, then one merge ------------------------------------------
def test_sharding_is_optional_and_skips_the_one_runner_gate():
    jobs = load_workflow()["jobs"]
    assert jobs["gate"]["if"] == "(inputs.shards || '1') < 2"
    # the plan runs for anything but 1 (or none), so a mistyped count fails there, never skips all
    assert jobs["plan"]["if"] == "${{ !((inputs.shards || '1') < 2) }}"
    assert jobs["shard"]["needs"] == "plan"
    assert jobs["shard"]["runs-on"] == ["self-hosted", "gpu"]
    assert (
        jobs["shard"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    )
    assert jobs["shard"]["strategy"]["fail-fast"] is False  # every shard runs to be merged
    assert jobs["merge"]["needs"] == ["plan", "shard"] and jobs["merge"]["if"].startswith(
        "always()"
    )


def test_plan_lists_shards_one_to_n_and_refuses_a_non_number(tmp_path):
    script = step_running("GITHUB_OUTPUT", job="plan")["run"]
    output = tmp_path / "output"
    env = {**os.environ, "SHARDS": "3", "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and output.read_text() == "count=3\nshards=[1,2,3]\n"
    env["SHARDS"] = "two"
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "shards must be a whole number" in done.stdout


def test_each_shard_runs_its_night_its_stored_comparison_and_its_own_ab():
    step = step_running("tox -e gpu-shard", job="shard")
    assert step["env"]["SHARD"] == "${{ matrix.shard }}/${{ needs.plan.outputs.count }}"
    commands = tox_environments()["gpu-shard"]
    assert "python -m perfgate nightly" in commands and "--perf-shard {env:SHARD}" in commands
    assert "--device cuda --perf-tier full" in commands and "--tests perf_tests" in commands
    checkout = step_using("actions/checkout", job="shard")
    assert checkout["with"]["fetch-depth"] == 0  # its A/B checks out the baseline's commit
    upload = step_using("actions/upload-artifact", job="shard")
    assert upload["if"] == "always()" and upload["with"]["path"] == "perfgate-results/"


@pytest.mark.parametrize("job, environment", [("gate", "gpu-nightly"), ("shard", "gpu-shard")])
def test_a_rerun_downloads_its_attempts_blocks_and_resumes_an_unfinished_ab(job, environment):
    download = next(s for s in steps(job) if s.get("uses", "").startswith(
        "actions/download-artifact@"))  # fmt: skip
    upload = step_using("actions/upload-artifact", job=job)
    assert download["if"] == "github.run_attempt != '1'" and download["continue-on-error"]
    assert download["with"]["name"] == upload["with"]["name"] and upload["with"]["overwrite"]
    assert download["with"]["path"] == "perfgate-results"
    assert f"tox -e {environment} -- --time-limit 50m" in step_running(f"tox -e {environment}",
                                                                        job)["run"]  # fmt: skip
    assert load_workflow()["jobs"][job]["timeout-minutes"] > 50  # the limit ends the A/B first


@pytest.mark.parametrize("journal, resumed", [(None, False), ("unfinished", True),
                                              ("complete", False)])  # fmt: skip
def test_the_night_step_resumes_only_an_unfinished_ab(tmp_path, journal, resumed):
    """The step's own shell script, with `tox` writing the arguments it was given."""
    if journal is not None:
        folder = tmp_path / "perfgate-results" / "ab-blocks"
        folder.mkdir(parents=True)
        lines = ['{"journal": 1, "plan": {}}'] + (['{"complete": true}'] if journal ==
                                                  "complete" else [])  # fmt: skip
        (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    tox = tmp_path / "bin" / "tox"
    tox.parent.mkdir()
    tox.write_text('#!/bin/sh\necho "$@" > args.txt\n')
    tox.chmod(0o755)
    env = {**os.environ, "PATH": f"{tox.parent}{os.pathsep}{os.environ['PATH']}"}
    script = step_running("tox -e gpu-nightly")["run"]
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "args.txt").read_text().split()
    assert args[:4] == ["-e", "gpu-nightly", "--", "--time-limit"]
    assert ("--resume" in args) is resumed


def write_shard(folder: Path, index: int, count: int, name: str, stored: str, ab: str | None):
    """A shard's results folder: its run (nightly.json) and its night, in which the stored
    comparison said ``stored`` of ``name`` and the A/B ``ab`` (None: no A/B)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import shard_run

    from perfgate.verdict import nightly as policy
    from perfgate.verdict.outcome import Verdict
    from perfgate.verdict.rows import GateRow

    folder.mkdir(parents=True)
    (folder / "nightly.json").write_text(json.dumps(shard_run(index, count, [name])))
    row = GateRow(f"t.py::{name}", Verdict(ab or stored), change_percent=5.0)
    decided = (policy.AB if ab else policy.STORED), f"{stored} +5.0%"
    night = policy.Night([policy.NightRow(row, *decided, ab, "flagged" if ab else None)],
                         "abc", 3, 0.03, 0.01, shard=f"{index}/{count}")  # fmt: skip
    (folder / "nightly-verdicts.json").write_text(json.dumps(policy.as_json(night)))


@pytest.mark.parametrize(
    "shards, status",
    [
        ([("unchanged", None), ("regression", "unchanged")], 0),  # the A/B overrode the stored
        ([("unchanged", None), ("unconfirmed", "regression")], 1),  # the A/B confirmed it
        ([("unchanged", None)], 3),  # shard 2 of 2 is missing
    ],
)
def test_the_fan_in_fails_only_on_an_ab_confirmed_regression(tmp_path, shards, status):
    """The merge step's own shell script, with `tox -e triage --` standing for perfgate."""
    for index, (stored, ab) in enumerate(shards, start=1):
        write_shard(tmp_path / "shards" / f"perfgate-shard-{index}-1", index, 2, f"c{index}",
                    stored, ab)  # fmt: skip
    tox = tmp_path / "bin" / "tox"
    tox.parent.mkdir()
    tox.write_text(f'#!/bin/sh\nshift 3\nexec {sys.executable} -m perfgate "$@"\n')
    tox.chmod(0o755)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])  # perfgate, tqdm
    env = {**os.environ, "PATH": f"{tox.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": path}  # fmt: skip
    script = step_running("nightly --shards", job="merge")["run"]
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == status, done.stdout + done.stderr
    if status == 3:
        assert "shard 2/2 is missing" in done.stderr
        return
    results = tmp_path / "perfgate-results"
    merged = json.loads((results / "nightly.json").read_text())
    assert [b["fullname"] for b in merged["benchmarks"]] == ["t.py::c1", "t.py::c2"]
    night = json.loads((results / "nightly-verdicts.json").read_text())
    assert sorted(case["name"] for case in night["rows"]) == ["t.py::c1", "t.py::c2"]
    assert (results / "nightly.md").read_text().startswith("# perfgate nightly")


def test_the_fan_in_judges_the_night_not_the_shard_jobs():
    merge = load_workflow()["jobs"]["merge"]
    assert not any("needs.shard.result" in str(step) for step in merge["steps"])
    step = step_running("nightly --shards", job="merge")
    assert not step.get("continue-on-error") and not re.search(r"\|\|\s*(true|:)", step["run"])
    download = step_using("actions/download-artifact", job="merge")
    assert download["with"]["pattern"] == "perfgate-shard-*-${{ github.run_id }}"
