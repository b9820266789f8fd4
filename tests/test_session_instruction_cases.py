"""--perf-measure instructions for any pytest-benchmark project (perfgate/session/
instruction_cases.py, session/counting.py, measure/callgrind*.py): the parent session's wiring
with the counting processes stood in for (fast), and, with valgrind, a pure-Python project
counted and gated end to end (slow)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfgate import options
from perfgate.measure import callgrind, callgrind_requests
from perfgate.measure import instructions as counters
from perfgate.session import instruction_cases
from perfgate.session.baseline import GATE_NOT_RUN

PROJECT = """
import pytest

def test_counted(benchmark):
    benchmark.extra_info["seen"] = "in the counting process only"
    raise AssertionError("the body of a counted test runs in the counting process, not here")

@pytest.mark.parametrize("size", [10, 20])
def test_sized(benchmark, size):
    raise AssertionError("not here either")

def test_plain():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_cases=PROJECT)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def counted(per_call: list[float], **extra) -> dict:
    """An entry as ``callgrind.measure`` returns it for a counted test."""
    return {"per_call": per_call, "allocator_per_call": 40.0, "calls": 4,
            "counters": {"python_calls": 3}, "top_functions": [["f", 900]],
            "group": "host", "extra_info": {"seen": "here"}, **extra}  # fmt: skip


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The counting processes stood in for: what they were asked (``spec``), and the entries
    they give (``entries``, by test id)."""
    asked: dict = {"entries": {}}

    def measure(spec, root, log, library, layouts):
        asked.update(spec=spec, layouts=layouts)
        return asked["entries"]

    monkeypatch.setattr(callgrind, "measure", measure)
    monkeypatch.setattr(callgrind, "missing_tools", lambda: [])
    monkeypatch.setattr(callgrind_requests, "build", lambda folder=None: Path("switch.so"))
    return asked


def run_inline(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "-p", "perfgate.plugin", "-p", "no:cacheprovider", "--perf-measure", "instructions", *args
    )


def test_each_benchmark_test_gets_its_counts_without_running_its_body(project, stand_in, tmp_path):
    stand_in["entries"] = {
        "test_cases.py::test_counted": counted([1000.0, 1010.0, 1005.0]),
        "test_cases.py::test_sized[10]": counted([500.0, 500.0, 500.0]),
        "test_cases.py::test_sized[20]": {"outcome": "skipped", "message": "no data for 20"},
    }
    report = tmp_path / "run.json"
    result = run_inline(project, f"--benchmark-json={report}", "-rs", "--perf-callgrind-layouts=2")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["*no data for 20*"])
    saved = {b["name"]: b for b in json.loads(report.read_text())["benchmarks"]}
    first = saved["test_counted"]
    assert first["stats"]["data"] == pytest.approx([1e-6, 1.01e-6, 1.005e-6])
    assert first["group"] == "host" and first["extra_info"]["seen"] == "here"
    extra = first["extra_info"]
    assert extra["instructions"] == 1005 and extra["instructions_spread"] == pytest.approx(0.01)
    assert extra["measure"] == "instructions" and extra["counters"] == {"python_calls": 3}
    assert extra["uncounted"] == counters.UNCOUNTED and extra["allocator_instructions"] == 40
    assert saved["test_sized[10]"]["extra_info"]["instructions"] == 500
    key = json.loads(report.read_text())["machine_info"]["perfgate"]["hardware_key"]
    assert key == counters.hardware_key()
    assert stand_in["layouts"] == 2 and stand_in["spec"]["nodeids"] == [
        "test_cases.py::test_counted",
        "test_cases.py::test_sized[10]",
        "test_cases.py::test_sized[20]",
    ]  # the plain test is not a benchmark: it runs here, as always


def test_a_test_that_failed_in_the_counting_process_fails_here_with_its_line(project, stand_in):
    message = "failed in the counting process (call): AssertionError: wrong result"
    stand_in["entries"] = {"test_cases.py::test_counted": {"outcome": "failed", "message": message}}
    result = run_inline(project, "-k", "counted")
    result.assert_outcomes(failed=1, deselected=3)
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stdout.str()
    # one failure, no teardown warning (an ERROR under filterwarnings = error) on top of it
    assert "Benchmark fixture was not used" not in result.stdout.str()


def test_a_failed_counting_process_fails_each_case_with_one_line(project, stand_in, monkeypatch):
    def measure(spec, root, log, library, layouts):
        raise callgrind.CallgrindError("the callgrind run failed (exit 4): ERROR: bad; full log")

    monkeypatch.setattr(callgrind, "measure", measure)
    result = run_inline(project, "-k", "sized")
    result.assert_outcomes(failed=2, deselected=2)
    result.stdout.fnmatch_lines(["*the callgrind run failed (exit 4): ERROR: bad; full log*"])


def test_the_counting_processes_get_this_sessions_options_and_the_tests_by_id(project, stand_in):
    run_inline(project, "test_cases.py", "-k", "sized", "--perf-gate-report", "/a/long/path.md",
               "--perf-callgrind-repeats", "4", "-p", "no:randomly")  # fmt: skip
    args = stand_in["spec"]["args"]
    assert args[:6] == ["-p", "perfgate.plugin", "-p", "no:cacheprovider", "-k", "sized"]
    assert "test_cases.py" not in args  # the paths given: the tests come by id instead
    assert not [arg for arg in args if "perf-gate" in arg or "repeats" in arg or arg == "4"]
    assert args[-2:] == ["src/test_cases.py::test_sized[10]", "src/test_cases.py::test_sized[20]"]
    assert "--perf-measure=instructions" in args and "--rootdir=src" in args
    assert stand_in["spec"]["repeats"] == 4


def test_the_counting_processes_let_perfgate_imported_before_pytest_pass_warnings_as_errors(
    project, stand_in
):
    """A counting process imports perfgate before pytest (with perfgate installed from a wheel,
    pytest warns that it cannot rewrite it) and saves nothing (pytest-benchmark warns "Not saving
    anything" under --benchmark-save): under a project's `filterwarnings = error` each warning
    was a traceback in the counting process and every case failed (cattrs, kornia)."""
    run_inline(project, "-W", "error::DeprecationWarning", "--benchmark-save=base")
    args = stand_in["spec"]["args"]
    given = args.index("error::DeprecationWarning")
    for category in ("pytest.PytestAssertRewriteWarning", "pytest_benchmark.logger."
                     "PytestBenchmarkWarning"):  # fmt: skip
        ignored = args.index(f"ignore::{category}")
        assert args[ignored - 1] == "-W" and ignored > given  # the later filter wins


def test_without_pytest_s_cache_the_counting_processes_get_no_cache_option(project, stand_in):
    """`-o cache_dir=...` with `-p no:cacheprovider` is an unknown option: a PytestConfigWarning
    that `filterwarnings = error` made an INTERNALERROR in the counting process (kornia)."""
    run_inline(project)  # run_inline gives -p no:cacheprovider
    assert not [arg for arg in stand_in["spec"]["args"] if arg.startswith("cache_dir=")]
    project.runpytest_inprocess("-p", "perfgate.plugin", "--perf-measure", "instructions")
    assert "cache_dir=$TMPDIR/pytest-cache" in stand_in["spec"]["args"]


def test_variables_named_with_perf_callgrind_env_reach_the_counting_processes(
    project, stand_in, monkeypatch, tmp_path
):
    """The counting process's environment is built, the same in every session: a variable a
    project's tests read (kornia's KORNIA_TEST_IN_SUBPROCESS) reaches it only when named."""
    monkeypatch.setenv("PROJECT_SWITCH", "on")
    monkeypatch.setenv("NOT_NAMED", "x")
    run_inline(project, "--perf-callgrind-env", "PROJECT_SWITCH", "--perf-callgrind-env=UNSET_ONE")
    spec = stand_in["spec"]
    assert spec["environment"] == {"PROJECT_SWITCH": "on"}  # an unset one is not invented
    assert not [arg for arg in spec["args"] if "callgrind-env" in arg or arg == "PROJECT_SWITCH"]

    started = {}
    popen = SimpleNamespace(Popen=lambda *a, env, **k: started.update(env))
    monkeypatch.setattr(callgrind, "subprocess", popen)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    callgrind._start(spec, project.path, scratch, tmp_path / "log", 0, Path(__file__))
    assert started["PROJECT_SWITCH"] == "on" and "NOT_NAMED" not in started


def test_a_bad_variable_name_is_one_usage_line(project):
    result = run_inline(project, "--perf-callgrind-env", "NOT A NAME")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "an environment variable's name" in result.stderr.str()


def test_perfgate_s_own_options_are_left_out_with_their_values():
    given = "-x --perf-gate --perf-gate-report r.md --perf-shard=1/2 -k a".split()
    given += "--perf-measure instructions --perf-lock-clocks --perf-tier quick".split()
    given += "--perf-callgrind-env A --perf-callgrind-env=B".split()
    assert options.without_own(given) == ["-x", "-k", "a", "--perf-tier", "quick"]


def test_a_timed_run_is_unchanged(project):
    project.makepyfile(test_timed="def test_timed(benchmark):\n    benchmark(lambda: None)\n")
    result = project.runpytest_inprocess("-p", "perfgate.plugin", "test_timed.py")
    result.assert_outcomes(passed=1)


def test_a_count_without_a_baseline_says_how_to_record_a_counted_one(project):
    # the hint dropped --perf-measure instructions: followed, it recorded a timed baseline
    if callgrind.missing_tools():
        pytest.skip("valgrind is not installed")
    result = run(project, "--perf-measure", "instructions", "--perf-gate", "-k", "counted")
    assert result.ret == GATE_NOT_RUN
    (line,) = [line for line in result.stderr.lines if "record one with" in line]
    command = shlex.split(line.split("`")[1])
    assert command[:1] == ["pytest"] and command[-4:] == [
        "--perf-measure", "instructions", "--perf-gate", "--benchmark-save=NAME"
    ]  # fmt: skip


# --- a machine that cannot count: one line --------------------------------------------------
def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "perfgate.plugin", "-p", "no:cacheprovider", *args)


def test_without_valgrind_the_gate_stops_with_one_line(project, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind on this PATH
    result = run(project, "--perf-measure", "instructions", "--perf-gate")
    assert result.ret == GATE_NOT_RUN  # never a green run that counted nothing
    result.stderr.fnmatch_lines(["*need valgrind*apt-get install valgrind*"])


def test_without_valgrind_an_ungated_run_skips_with_the_reason(project, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run(project, "--perf-measure", "instructions", "-k", "counted", "-rs")
    result.assert_outcomes(skipped=1, deselected=3)
    result.stdout.fnmatch_lines(["*need valgrind*apt-get install valgrind*"])


def test_without_a_c_compiler_the_gate_stops_with_one_line(project, monkeypatch, tmp_path):
    if callgrind.missing_tools():
        pytest.skip("valgrind is not installed")
    for tool in callgrind.TOOLS:  # valgrind on PATH, no compiler
        (tmp_path / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = run(project, "--perf-measure", "instructions", "--perf-gate")
    assert result.ret == GATE_NOT_RUN
    result.stderr.fnmatch_lines(["*no C compiler (cc)*apt-get install gcc*"])
    assert len([line for line in result.stderr.lines if line.strip()]) == 1


def test_the_storage_key_is_the_instruction_key_only_when_counting():
    read = options.Options(measure="instructions")
    assert instruction_cases.storage_key(read) == counters.hardware_key()
    assert instruction_cases.storage_key(options.Options()) is None


# --- with valgrind: a pure-Python project, counted and gated --------------------------------
WORK = """
import zlib

BUFFER = bytes({size})


def checksum():
    return zlib.crc32(BUFFER)


def python_work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
"""
BENCHMARKS = """
import pytest
from work import checksum, python_work

pytestmark = pytest.mark.perfgate(threshold=0.005)


def test_checksum(benchmark):
    benchmark(checksum)


@pytest.mark.parametrize("n", [3000])
def test_python(benchmark, n):
    assert benchmark(python_work, n) == sum(i * i for i in range(n))


def test_checksum_after_a_setup(benchmark):
    def setup():
        python_work(1000)  # four times the call's own work, never counted

    benchmark.pedantic(checksum, setup=setup, rounds=100)
"""


@pytest.mark.slow
@pytest.mark.skipif(bool(callgrind.missing_tools()), reason="valgrind is not installed")
def test_a_pure_python_project_is_counted_and_a_one_percent_change_is_caught_and_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(work=WORK.format(size=40_000), test_bench=BENCHMARKS)
    # the default three heap layouts, as a user gets them: with one, the Python loop's count
    # moved 1.5 % between two CI sessions (the allocator's pools; 3 layouts agree, see
    # measure/callgrind.py)
    common = ["--perf-measure=instructions", "-p", "no:xdist"]
    common += ["--perf-callgrind-repeats=2", "--perf-baselines=baselines"]
    recorded = run(pytester, *common, "--benchmark-save=base")
    recorded.assert_outcomes(passed=3)
    (saved,) = Path(pytester.path, "baselines").rglob("*base.json")
    counts = {b["name"]: b["extra_info"] for b in json.loads(saved.read_text())["benchmarks"]}
    assert counts["test_python[3000]"]["counters"] == {"python_calls": 1}
    plain, after_setup = (
        counts[n]["instructions"] for n in ("test_checksum", "test_checksum_after_a_setup")
    )
    # the setup's work (about 600,000 instructions) is not counted; the switch around each
    # call is (about 1,000: a setup runs between calls, so each is counted alone)
    assert 0 <= after_setup - plain < 2_000

    pytester.makepyfile(work=WORK.format(size=40_400))  # 1 % more of one C function's work
    gated = run(pytester, *common, "--perf-gate")
    assert gated.ret == 1
    output = gated.stdout.str()
    assert "3 gated (2 regression, 1 unchanged)" in output, output  # test_python: A/A
    regressions = output.split("Confirmed regressions")[1].split("perfgate gate: summary")[0]
    named = {line.split(" |")[0].strip() for line in regressions.splitlines() if " |" in line}
    assert named == {"test_bench.py::test_checksum", "test_bench.py::test_checksum_after_a_setup"}
    assert "crc32_z" in regressions  # the function that changed, named
