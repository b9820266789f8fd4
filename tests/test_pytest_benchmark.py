"""perfgate/_pytest_benchmark.py against the installed pytest-benchmark: every private attribute
perfgate relies on, exercised inside a real pytest session (pytester)."""

from __future__ import annotations

import pytest

ADAPTER_CHECKS = """
import json
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark as adapter


def test_adapter(benchmark, request):
    config = request.config
    assert not adapter.disabled(config)
    readings = iter(range(100))
    adapter.set_timer(benchmark, lambda: float(next(readings)))  # each round reads 1 s
    benchmark.pedantic(lambda: None, rounds=3, iterations=1, warmup_rounds=0)
    assert adapter.samples(benchmark) == [1.0, 1.0, 1.0]
    assert adapter.result_count(config) == 1
    assert adapter.timed_names(config) == {request.node.nodeid}
    adapter.add_extra_info(config, request.node.nodeid, "profile", {"clock": "cpu"})
    assert benchmark.extra_info["profile"] == {"clock": "cpu"}
    run = adapter.current_run(config)
    assert run.benchmarks[request.node.nodeid].samples == (1.0, 1.0, 1.0)
    assert "perfgate" in run.machine_info and adapter.machine_id(config)
    taken = adapter.take_results_since(config, 0)
    assert list(taken.benchmarks) == [request.node.nodeid]
    assert adapter.result_count(config) == 0

    baseline = Path("baseline.json")
    adapter.show_comparison_with(config, baseline, [{"fullname": "x", "stats": {}}])
    session = config._benchmarksession
    assert list(session.compared_mapping.values()) == [{"x": {"fullname": "x", "stats": {}}}]
    saved = []
    adapter.route_saving(config, lambda data, name: saved.append(name))
    session.storage.save({}, "run")
    assert saved == ["run"]
    adapter.drop_compare_fail(config)
    assert session.compare_fail == [] and config.option.benchmark_compare_fail == []


def test_profiled_fixture(benchmark, request):
    adapter.mark_not_timed(benchmark)  # no result, and no "fixture was not used" warning
    assert adapter.timed_names(request.config) == set()


def handed(benchmark):
    calls = []
    adapter.count_instead(benchmark, lambda *given: calls.append(given) or "result")
    return calls


def test_counted_call(benchmark):
    calls = handed(benchmark)
    assert benchmark(divmod, 7, b=2) == "result"
    assert calls == [(divmod, (7,), {"b": 2}, None, None)]
    with pytest.raises(Exception, match="only be used once"):
        benchmark(divmod, 7, 2)


def test_counted_pedantic_call(benchmark, request):
    calls = handed(benchmark)
    setup, teardown = (lambda: ((1,), {})), (lambda *a: None)
    with pytest.raises(ValueError, match="iterations"):
        benchmark.pedantic(divmod, setup=setup, iterations=2)
    benchmark._mode = None  # the refused call above used the fixture
    benchmark.pedantic(divmod, setup=setup, teardown=teardown, rounds=50)
    assert calls == [(divmod, (), {}, setup, teardown)]
    assert adapter.timed_names(request.config) == set()  # counted, not timed
"""


def test_adapter_reaches_what_perfgate_needs(pytester: pytest.Pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_adapter=ADAPTER_CHECKS)
    result = pytester.runpytest_subprocess(
        "-p", "perfgate.plugin", "-p", "no:cacheprovider", "-o", "perfgate=true"
    )
    result.assert_outcomes(passed=4)
    result.stdout.no_fnmatch_line("*not used at all*")


def test_disabled_is_seen(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_disabled="""
        from perfgate import _pytest_benchmark as adapter

        def test_it(benchmark, request):
            assert adapter.disabled(request.config)
            benchmark(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("-p", "perfgate.plugin", "--benchmark-disable")
    result.assert_outcomes(passed=1)
