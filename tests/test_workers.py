"""Merging a fake two-worker run (pytest-xdist, one worker per GPU) into one run JSON that the
store and the gate read like any other."""

from __future__ import annotations

import json

import pytest
from synthetic_runs import entry, rounds, run_json

from perfgate.benchmark import run_from_json
from perfgate.verdict import judge
from perfgate.workers import MergeError, merge_worker_runs


def worker_run(*names: str, untrusted=None, key="NVIDIA-H100", day="2026-11-23") -> dict:
    entries = [entry(f"perf_tests/test_x.py::{n}", rounds(i)) for i, n in enumerate(names)]
    run = run_json(*entries, untrusted=untrusted, key=key, datetime=f"{day}T10:00:00+00:00")
    return json.loads(json.dumps(run))


def test_two_workers_make_one_run_the_gate_reads():
    runs = {"gw1": worker_run("test_c", day="2026-11-24"), "gw0": worker_run("test_a", "test_b")}
    merged = merge_worker_runs(runs)
    run = run_from_json(merged, None)
    names = [b.name for b in run.benchmarks.values()]
    assert names == ["test_a", "test_b", "test_c"]  # worker order, then each worker's order
    workers = [b.extra_info["worker"] for b in run.benchmarks.values()]
    assert workers == ["gw0", "gw0", "gw1"]
    assert merged["datetime"].startswith("2026-11-23") and run.perfgate["workers"] == ["gw0", "gw1"]
    assert not run.untrusted_reasons
    # the merged run is an ordinary run: judged against itself, all unchanged
    assert {str(r.verdict) for r in judge([run], run)} == {"unchanged"}
    assert runs["gw0"]["benchmarks"][0]["extra_info"] == {}  # the workers' runs are not changed


def test_an_untrusted_gpu_on_one_worker_makes_the_run_untrusted():
    runs = {"gw0": worker_run("test_a"), "gw1": worker_run("test_b", untrusted=["too hot"])}
    run = run_from_json(merge_worker_runs(runs), None)
    assert run.untrusted_reasons == ["gw1: too hot"]


TWICE = {"gw0": worker_run("test_a"), "gw1": worker_run("test_a")}
MIXED = {"gw0": worker_run("test_a"), "gw1": worker_run("test_b", key="NVIDIA-A100")}


@pytest.mark.parametrize(
    "runs, message",
    [
        ({}, "no worker wrote a run"),
        (TWICE, "test_a was run by both gw0 and gw1"),
        (MIXED, "workers ran on different hardware (gw0: NVIDIA-H100, gw1: NVIDIA-A100)"),
    ],
)
def test_runs_that_cannot_be_one_run_say_why(runs, message):
    with pytest.raises(MergeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        merge_worker_runs(runs)
