"""NVML through a fake ``pynvml`` (no GPU here): GPU health, per-round SM clocks, and
--perf-lock-clocks. Clock locking is never called against a real device in these tests."""

from __future__ import annotations

import os
import sys
import types

import pytest
from helpers import FAKE_PYNVML, install_fake_pynvml, rounds, single

from perfgate.measure import machine, nvml
from perfgate.verdict import Verdict, judge


@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    yield install_fake_pynvml(monkeypatch)
    nvml.forget()


@pytest.fixture
def no_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    nvml.forget()
    yield
    nvml.forget()


def test_gpu_health_reads_nvml_under_nvidia_smi_names(fake_pynvml, monkeypatch):
    monkeypatch.setattr(machine.shutil, "which", lambda name: pytest.fail("nvidia-smi ran"))
    health = machine.gpu_health()
    assert health["source"] == "nvml" and health["trusted"] and health["available"]
    assert (health["name"], health["driver_version"]) == ("NVIDIA H100 80GB HBM3", "580.159.04")
    assert (health["clocks.sm"], health["clocks.max.sm"], health["clocks.mem"]) == (
        "1980", "1980", "2619")  # fmt: skip
    assert (health["power.draw"], health["temperature.gpu"]) == ("312.50", "41")
    assert int(health["clocks_throttle_reasons.active"], 16) == 0x4  # power cap: still trusted


def test_thermal_throttling_or_another_process_is_untrusted(fake_pynvml):
    fake_pynvml.THROTTLE = 0x4 | 0x40
    fake_pynvml.PROCESSES = [(os.getpid(), 900, 0), (4242, 1024, 0)]
    health = machine.gpu_health()
    assert not health["trusted"]
    others = "other processes on the GPU: pid 4242 (1024 MiB)"
    assert health["untrusted_reasons"] == ["GPU throttling (reasons 0x44)", others]


@pytest.mark.parametrize("case", ["no pynvml", "no driver"])
def test_without_nvml_gpu_health_falls_back_to_nvidia_smi(case, monkeypatch, request):
    if case == "no pynvml":
        request.getfixturevalue("no_pynvml")
    else:
        request.getfixturevalue("fake_pynvml").INIT_ERROR = 9  # e.g. driver not loaded
    asked = []
    monkeypatch.setattr(machine.shutil, "which", lambda name: asked.append(name))
    assert nvml.device() is None
    assert machine.gpu_health() == {"available": False} and asked == ["nvidia-smi"]


def counting_timer():
    ticks = iter(range(1000))
    return lambda: float(next(ticks))


def test_round_clocks_read_after_each_round_and_flag_reduced_ones(fake_pynvml):
    # pytest-benchmark reads its timer at each round's start and end: 2 warm-up + 5 rounds
    fake_pynvml.SM_CLOCKS = [1410, 1410, 1980, 1980, 1755, 1980, 1980]
    clocks = nvml.round_clocks()
    timer = clocks.wrap(counting_timer())
    readings = [timer() for _ in range(14)]
    assert readings == list(range(14))  # the timer's own readings pass through unchanged
    facts = clocks.facts(rounds=5)
    assert facts == {"sm_clock_mhz": [1980, 1980, 1755, 1980, 1980], "reduced_clock_rounds": 1}


def test_no_round_clocks_without_nvml(no_pynvml):
    assert nvml.round_clocks() is None


ROUND_COUNT_TEST = """
from perfgate import _pytest_benchmark
from perfgate.measure import nvml

class Gpu:
    def __init__(self):
        self.reads = 0

    def sm_clock_mhz(self):
        self.reads += 1
        return 1980

def test_reads(benchmark):
    gpu = Gpu()
    clocks = nvml.RoundClocks(gpu)
    _pytest_benchmark.set_timer(benchmark, clocks.wrap(_pytest_benchmark_timer()))
    benchmark.pedantic(lambda: None, rounds=5, iterations=3, warmup_rounds=2)
    assert gpu.reads == 7 and len(clocks.facts(5)["sm_clock_mhz"]) == 5

def _pytest_benchmark_timer():
    import time
    return time.perf_counter
"""


def test_pytest_benchmark_reads_the_timer_twice_per_round(pytester, monkeypatch):
    # RoundClocks counts on it: one clock read per round, warm-up rounds included
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_rounds=ROUND_COUNT_TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)


def test_a_power_limited_case_is_gated_and_its_clocks_explain_the_verdict():
    # the H100 holds its largest kernels below the top clock by power in every run: still gated
    extra = {"reduced_clock_rounds": 9}
    baseline = single("test_k", rounds(1), extra={"reduced_clock_rounds": 30})
    (same,) = judge([baseline], single("test_k", rounds(1), extra=extra))
    assert same.verdict is Verdict.UNCHANGED and same.verdict.gated
    assert same.clocks == (
        "power-limited: the baseline ran 30 of 30 rounds below 95 % of its highest SM clock; "
        "the current run ran 9 of 30 rounds below 95 % of its highest SM clock"
    )
    assert same.clocks in same.details
    (slower,) = judge([baseline], single("test_k", rounds(2, slowdown=1.5), extra=extra))
    assert slower.verdict is Verdict.UNCONFIRMED and slower.clocks.startswith("power-limited")
    few_reduced = single("test_k", rounds(2), extra={"reduced_clock_rounds": 6})
    (few,) = judge([single("test_k", rounds(1))], few_reduced)
    assert few.verdict.gated and few.clocks is None  # 6 of 30 is within the 20 % allowed


def test_lock_and_reset_through_nvml(fake_pynvml):
    line, undo = nvml.lock_base_clocks_for_session()
    assert "locked at base" in line and fake_pynvml.CALLS == [("lock", 0xFFFFFF01, 0xFFFFFF01)]
    undo()
    assert fake_pynvml.CALLS[-1] == ("reset",)


@pytest.mark.parametrize(
    "error, advice", [(4, "it needs root"), (3, "does not support locked clocks")]
)
def test_lock_refused_says_so_in_one_line_and_goes_on(fake_pynvml, error, advice):
    fake_pynvml.LOCK_ERROR = error
    line, undo = nvml.lock_base_clocks_for_session()
    assert undo is None and advice in line and line.endswith("going on with unlocked clocks")
    assert "\n" not in line


def test_lock_without_nvml_says_how_to_get_it(no_pynvml):
    line, undo = nvml.lock_base_clocks_for_session()
    assert undo is None and "pip install 'perfgate[gpu]'" in line


LOCK_TEST = """
def test_nothing():
    pass
"""


@pytest.mark.parametrize("refused", [False, True])
def test_perf_lock_clocks_option_locks_and_resets(pytester, monkeypatch, refused):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    fake = FAKE_PYNVML + (
        "\nimport atexit, pathlib\n"
        "atexit.register(lambda: pathlib.Path('calls.txt').write_text(repr(CALLS)))\n"
    )
    if refused:
        fake += "LOCK_ERROR = NVML_ERROR_NO_PERMISSION\n"
    pytester.makepyfile(pynvml=fake, test_lock=LOCK_TEST)
    result = pytester.runpytest_subprocess("-p", "perfgate.plugin", "--perf-lock-clocks",
                                           "-p", "no:cacheprovider")  # fmt: skip
    assert result.ret == 0
    calls = (pytester.path / "calls.txt").read_text()
    if refused:
        result.stdout.fnmatch_lines(["*NVML refused to lock the GPU clocks*needs root*going on*"])
        assert "reset" not in calls
    else:
        result.stdout.fnmatch_lines(["perfgate: GPU clocks locked at base (NVML)*"])
        assert calls == "[('lock', 4294967041, 4294967041), ('reset',)]"
