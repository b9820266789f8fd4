"""Inside the counting process (perfgate/measure/callgrind_child.py, target.py,
exact_counters.py, callgrind_requests.py): what is counted of a benchmarked call (the call, never
its setup or teardown), how many calls make a repeat, and the callgrind switch's library."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from perfgate.measure import callgrind_requests
from perfgate.measure.callgrind_child import MAX_CALLS, TARGET_INSTRUCTIONS, calls_for
from perfgate.measure.exact_counters import aten_operators, exact_counters, per_call, python_calls
from perfgate.measure.target import Target


def switches(log: list[str]):
    return functools.partial(log.append, "on"), functools.partial(log.append, "off")


def test_without_a_setup_the_whole_loop_is_one_counted_part():
    log: list[str] = []
    result = Target(divmod, (7, 2)).run(3, *switches(log))
    assert result == (3, 1) and log == ["on", "off"]


def test_with_a_setup_each_call_is_counted_alone_with_its_own_arguments():
    log: list[str] = []
    made = iter(range(10))

    def setup():
        log.append("setup")
        return (next(made),), {}

    target = Target(log.append, setup=setup, teardown=lambda n: log.append(f"teardown {n}"))
    target.run(2, *switches(log))
    assert log == ["setup", "on", 0, "off", "teardown 0", "setup", "on", 1, "off", "teardown 1"]


def test_a_setup_returning_nothing_keeps_the_given_arguments():
    assert Target(divmod, (7, 2), setup=lambda: None).run(1) == (3, 1)


def test_a_call_that_raises_leaves_the_switch_off():
    log: list[str] = []
    with pytest.raises(ZeroDivisionError):
        Target(divmod, (1, 0)).run(2, *switches(log))
    assert log == ["on", "off"]


def test_python_calls_count_the_call_and_never_its_setup():
    def inner():
        return len([1])  # a builtin: not counted

    def outer():
        inner()
        inner()

    def costly_setup():
        for _ in range(50):
            inner()  # Python calls the count must not see
        return (), {}

    plain, with_setup = Target(outer), Target(outer, setup=costly_setup)
    assert python_calls(lambda on, off: plain.run(4, on, off)) == 12
    assert python_calls(lambda on, off: with_setup.run(4, on, off)) == 12
    extra = functools.partial(len, "abc")  # the injected C call adds no Python call
    assert python_calls(lambda on, off: plain.run(4, on, off, extra)) == 12


def test_aten_operators_count_each_dispatched_operator_of_the_call_only():
    x = torch.ones(3)
    target = Target(torch.add, (x, x), setup=lambda: ((x * 2, x), {}))  # the setup's mul: uncounted
    assert aten_operators(lambda on, off: target.run(5, on, off)) == 5


def test_exact_counters_of_a_pure_python_call_are_its_python_calls(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch")  # as in a project without torch
    assert exact_counters(lambda on, off: Target(abs, (-1,)).run(2, on, off), 2, None) == {
        "python_calls": 0
    }


def test_per_call_is_an_int_when_it_divides():
    assert per_call(10, 5) == 2 and isinstance(per_call(10, 5), int)
    assert per_call(11, 5) == 2.2


@pytest.mark.parametrize(
    "per_call_count, calls",
    [(TARGET_INSTRUCTIONS * 3, 1), (TARGET_INSTRUCTIONS / 3, 4), (85_000, 128), (1, MAX_CALLS)],
)
def test_a_repeat_is_a_power_of_two_calls_of_at_least_the_target(per_call_count, calls):
    assert calls_for(per_call_count) == calls


def test_a_count_a_little_off_gives_the_same_calls():
    assert calls_for(85_000) == calls_for(85_000 * 1.01) == calls_for(85_000 * 0.99)


def test_the_switch_is_built_once_per_cache_folder(tmp_path):
    if callgrind_requests.compiler() is None:
        pytest.skip("no C compiler")
    try:
        first = callgrind_requests.build(tmp_path)
    except callgrind_requests.RequestsUnavailable as error:
        pytest.skip(str(error))
    assert callgrind_requests.build(tmp_path) == first and first.parent == tmp_path
    switches_ = callgrind_requests.Requests(first)
    switches_.toggle_collect()  # outside valgrind a client request does nothing
    switches_.toggle_collect()


def test_a_missing_header_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    if callgrind_requests.compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setattr(callgrind_requests, "HEADER", "valgrind/no_such_header.h")
    with pytest.raises(callgrind_requests.RequestsUnavailable, match="apt-get install valgrind"):
        callgrind_requests.build(tmp_path)


def test_a_compiler_that_fails_is_one_line(tmp_path, monkeypatch):
    if callgrind_requests.compiler() is None:
        pytest.skip("no C compiler")
    header = Path(tmp_path, "valgrind", "callgrind.h")
    header.parent.mkdir()
    header.write_text("int broken = ;\n")  # found first (C_INCLUDE_PATH); does not compile
    monkeypatch.setenv("C_INCLUDE_PATH", str(tmp_path))
    with pytest.raises(callgrind_requests.RequestsUnavailable, match="could not build") as caught:
        callgrind_requests.build(tmp_path / "cache")
    assert "\n" not in str(caught.value)
