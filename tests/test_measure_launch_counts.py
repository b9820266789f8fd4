"""Host-bound CUDA cases gated on exact launch counts: the counts read from a profiler trace
(fake traces here, the H100's in docs/gate-validation/h100-session7/), the verdict on them, the
nightly that leaves them to the stored comparison, and end to end on the CPU with a fake counter:
counts saved with a baseline, then a count that grew fails the gate."""

from __future__ import annotations

import json

import pytest
from helpers import COUNTED_CASE, rounds_at, run, saved_runs, single, virtual_clock_project

from perfgate.measure.launch_counts import count_trace
from perfgate.verdict import Verdict, judge
from perfgate.verdict.launches import GATED_ON
from perfgate.verdict.nightly import ab_reason, decide
from perfgate.verdict.reason import Reason
from perfgate.verdict.rows import from_json
from perfgate.verdict.summary import as_json

RESNET = "test_resnet18_steady[cuda-1-eager]"


def api(name: str, correlation: int, category: str = "cuda_runtime") -> dict:
    return {"ph": "X", "cat": category, "name": name, "args": {"correlation": correlation}}


def device(correlation: int, category: str = "kernel") -> dict:
    return {
        "ph": "X",
        "cat": category,
        "name": "void k<float>()",
        "args": {"correlation": correlation},
    }


def test_launches_graph_launches_and_graph_nodes_are_counted_per_call():
    events = []
    for call in range(2):  # two calls: 3 kernels (runtime, driver, versioned), 1 graph of 3 nodes
        base = 10 * call
        events += [api("cudaLaunchKernel", base + 1), device(base + 1),
                   api("cuLaunchKernelEx", base + 2, "cuda_driver"), device(base + 2),
                   api("cudaLaunchKernelExC_v11060", base + 3), device(base + 3),
                   api("cudaGraphLaunch_v10000", base + 4), device(base + 4), device(base + 4),
                   device(base + 4, "gpu_memcpy"),
                   api("cudaMemcpyAsync", base + 5), device(base + 5, "gpu_memcpy"),
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {}}]  # fmt: skip
    assert count_trace(events, calls=2) == {
        "kernel_launches": 3,
        "graph_launches": 1,
        "graph_nodes": 3,  # a plain copy's correlation is no graph launch's
    }
    assert count_trace([api("cudaLaunchKernel", 1)], calls=2)["kernel_launches"] == 0.5  # uneven


def host_bound(counts: dict | None, median_s: float, seed: int):
    extra = {"host_bound": True} | ({"launch_counts": counts} if counts is not None else {})
    return single(RESNET, rounds_at(median_s, seed), extra=extra)


COUNTS = {"kernel_launches": 102, "graph_launches": 0, "graph_nodes": 0}


def test_a_host_bound_case_is_gated_on_its_counts_and_its_time_is_shown_not_gated():
    (result,) = judge([host_bound(COUNTS, 2.2e-3, 0)], host_bound(COUNTS, 3.0e-3, 1))
    assert result.verdict is Verdict.UNCHANGED  # +36 % of host jitter: shown, not judged
    assert "kernel_launches 102 (exact, unchanged)" in result.message
    assert "wall time +36.4% (shown, not gated: host-bound)" in result.message
    (row,) = as_json([result])["rows"]
    assert row["gated"] and row["gated_on"] == GATED_ON and row["threshold"] == 0.0


@pytest.mark.parametrize(
    "now, verdict, said",
    [
        (
            {**COUNTS, "kernel_launches": 103},
            Verdict.REGRESSION,
            "kernel_launches 103 vs baseline 102",
        ),
        ({**COUNTS, "graph_nodes": 1}, Verdict.REGRESSION, "graph_nodes 1 vs baseline 0"),
        (
            {**COUNTS, "kernel_launches": 60},
            Verdict.IMPROVEMENT,
            "kernel_launches 60 vs baseline 102",
        ),
    ],
)
def test_any_count_that_grew_is_a_regression_and_one_that_fell_an_improvement(now, verdict, said):
    # the time is 2 % faster: a count decides, whatever the time did
    (result,) = judge([host_bound(COUNTS, 2.2e-3, 0)], host_bound(now, 2.16e-3, 1))
    assert result.verdict is verdict and said in result.message, result.message


def test_without_counts_on_a_side_a_host_bound_case_stays_not_gated():
    for before, now in ((None, COUNTS), (COUNTS, None)):
        (result,) = judge([host_bound(before, 2.2e-3, 0)], host_bound(now, 2.2e-3, 1))
        assert (result.verdict, result.reason) == (Verdict.NOT_GATED, Reason.HOST_BOUND)


def test_the_nightly_leaves_count_gated_cases_to_the_stored_comparison():
    (result,) = judge([host_bound(COUNTS, 2.2e-3, 0)], host_bound(COUNTS, 3.0e-3, 1))
    (row,) = from_json(as_json([result]))
    assert ab_reason(row, screen=0.01, target=0.03) is None  # +36 % would pass the 1 % screen
    (night,) = decide([row], {}, {})
    assert (night.verdict, night.decided_by) == ("unchanged", f"stored comparison, {GATED_ON}")


# --- end to end on the CPU: a fake counter stands in for the profiler --------------------------


def test_counts_are_saved_with_a_baseline_and_a_count_that_grew_fails_the_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    project = virtual_clock_project(pytester, monkeypatch, test_model=COUNTED_CASE)
    monkeypatch.setenv("FAKE_LAUNCHES", "102")
    saving = run(project, "--benchmark-save=base")
    saving.assert_outcomes(passed=1)  # the counting re-run is not a test
    saving.stdout.fnmatch_lines(["perfgate: counting the launches of 1 wall-timed CUDA cases"])
    (saved,) = saved_runs(project)
    (case,) = json.loads(saved.read_text())["benchmarks"]  # once: the re-run is not saved
    assert case["extra_info"]["launch_counts"] == {"kernel_launches": 102}

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.003")  # 50 % slower: host jitter, not judged
    same = run(project, "--perf-gate")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*1 gated (1 unchanged)*"])

    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    monkeypatch.setenv("FAKE_LAUNCHES", "103")
    more = run(project, "--perf-gate")
    assert more.ret == 1, more.stdout.str()
    more.stdout.fnmatch_lines(["*kernel_launches 103 vs baseline 102 (exact: any increase fails)*"])
