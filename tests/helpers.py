"""What the tests share (not a test module: no ``test_`` prefix): running ``perfgate`` in-process
and reading its one error line, a git command in a throwaway repository, synthetic
pytest-benchmark runs for the verdict (per-round seconds with seeded lognormal noise, declarations
as the perfgate marker saves them, loaded with ``run_from_json``), and synthetic run histories
with a known step for the triage tools."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import types
import uuid
from pathlib import Path

import numpy as np
import pytest

from perfgate import Ratio
from perfgate.benchmark import Run, run_from_json
from perfgate.session.baseline import GATE_NOT_RUN


# --- the command line -------------------------------------------------------------------------
def perfgate(*args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr)."""
    from perfgate.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


CHECKOUT = Path(__file__).resolve().parents[1]
# a child pytest outside this checkout loads the plugin by name: nothing needs perfgate installed
LOAD_PLUGIN = ("-p", "perfgate.plugin")


def children_import_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child processes started from now on import this checkout's perfgate (PYTHONPATH), whether
    perfgate is installed or not."""
    paths = [str(CHECKOUT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path for path in paths if path))


def refused_at_the_door(capsys: pytest.CaptureFixture, *args: str) -> str:
    """The error line of a command line its parser refuses (an option's type): exit 2, the
    command's usage, then ``perfgate NAME: error: argument ...``; nothing runs."""
    from perfgate.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("usage: perfgate") and "Traceback" not in "\n".join(lines), lines
    assert lines[-1].startswith(f"perfgate {args[0]}: error: argument "), lines
    return lines[-1]


def assert_png(path: Path) -> None:
    """``path`` is a PNG of some size (a plot, not an empty file)."""
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert path.stat().st_size > 10_000, f"{path} is suspiciously small"


def error_line(err: str, command: str) -> str:
    """The one error line of ``err``; anything else there is a "reading ..." progress line."""
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith(f"perfgate {command}: error: ")]
    assert len(errors) == 1, err
    assert all(line in errors or line.startswith("reading ") for line in lines), err
    assert "Traceback" not in err
    return errors[0]


def git(repo: Path, *arguments: str) -> str:
    """``git -C repo ARGUMENTS`` as a throwaway identity; its standard output."""
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *arguments]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


# --- synthetic runs for the verdict ----------------------------------------------------------

SPEEDUP = Ratio("speedup over naive attention", key="implementation", reference="naive")
SDPA = {"family": "sdpa", "ratios": [SPEEDUP.as_json()]}
COMPILE_SPEEDUP = Ratio("speedup of compiled over eager", key="mode", reference="eager")
COMPILE = {"family": "compile", "ratios": [COMPILE_SPEEDUP.as_json()]}
DENSE_LATENCY = Ratio(
    "latency relative to dense", key="implementation", reference="dense", higher_is_better=False
)
COPY_FRACTION = Ratio("fraction of the copy roofline", field="fraction_of_copy")
DATETIME = "2026-11-20T10:00:00+00:00"


def lognormal_rounds(rng: np.random.Generator, n: int, cv: float, median_s: float = 1e-3):
    """``n`` per-round durations (seconds) with lognormal noise of coefficient of variation cv."""
    return median_s * rng.lognormal(0.0, math.sqrt(math.log1p(cv**2)), n)


def rounds(seed: int, slowdown: float = 1.0, n: int = 30, cv: float = 0.05) -> list[float]:
    """Rounds around 1 ms (times ``slowdown``), noise from ``seed``."""
    return list(lognormal_rounds(np.random.default_rng(seed), n, cv) * slowdown)


def rounds_at(median_s: float, seed: int, n: int = 30, cv: float = 0.03) -> list[float]:
    """Rounds whose median is exactly ``median_s`` seconds."""
    noise = np.random.default_rng(seed).lognormal(0.0, cv, n)
    return list(median_s * noise / np.median(noise))


def entry(
    fullname: str,
    samples: list[float] | None,
    params: dict | None = None,
    extra: dict | None = None,
    declared: dict | None = None,
    median: float | None = None,
) -> dict:
    """One benchmark as pytest-benchmark saves it; ``samples`` None saves no per-round data."""
    stats = {"median": median if median is not None else float(np.median(samples))}
    if samples is not None:
        stats["data"] = list(samples)
    extra = dict(extra or {})
    if declared:
        extra["perfgate"] = declared
    name = fullname.split("::")[-1]
    return {"name": name, "fullname": fullname, "params": params or {}, "extra_info": extra,
            "stats": stats, "group": None}  # fmt: skip


OTHERS = "other processes on the GPU"  # a reason that names them, as machine.py writes it


def run_json(*entries: dict, datetime: str = DATETIME, software: dict | None = None,
             untrusted: list[str] | None = None, key: str = "TEST-KEY") -> dict:  # fmt: skip
    perfgate = {"hardware_key": key, "software": software or {"torch": "2.13.0"}}
    if untrusted:
        others = [p for r in untrusted if r.startswith(OTHERS + ": ") for p in
                  r.removeprefix(OTHERS + ": ").split("; ")]  # fmt: skip
        perfgate["gpu_health"] = {"trusted": False, "untrusted_reasons": untrusted,
                                  "other_processes": others}  # fmt: skip
    return {
        "machine_info": {"perfgate": perfgate},
        "commit_info": {"id": "abc123"},
        "benchmarks": list(entries),
        "datetime": datetime,
        "version": "5.2.3",
    }


def run_of(*entries: dict, path: Path | None = None, **facts) -> Run:
    return run_from_json(json.loads(json.dumps(run_json(*entries, **facts))), path)


RUN_FACTS = {"datetime", "software", "untrusted", "key", "path"}


def single(name: str, samples, **fields) -> Run:
    """A run of one benchmark ``perf_tests/test_x.py::<name>``; ``fields`` go to ``entry``,
    except the run's own facts (``untrusted``, ``software``, ``datetime``, ``key``, ``path``)."""
    facts = {k: fields.pop(k) for k in RUN_FACTS & set(fields)}
    return run_of(entry(f"perf_tests/test_x.py::{name}", samples, **fields), **facts)


def attention(implementation: str, median_s: float, seed: int, declared: bool = True) -> dict:
    name = f"perf_tests/test_sdpa.py::test_attention[cuda-32x8x128x64-{implementation}-fp16]"
    params = {"bench_device": "cuda", "shape": [32, 8, 128, 64], "dtype_name": "fp16",
              "implementation": implementation}  # fmt: skip
    return entry(name, rounds_at(median_s, seed), params, declared=SDPA if declared else None)


def attention_run(naive_s: float, flash_s: float, seed: int, **facts) -> Run:
    """naive and flash attention in one run (seeds ``seed`` and ``seed + 1``)."""
    return run_of(attention("naive", naive_s, seed), attention("flash", flash_s, seed + 1), **facts)


FLASH = attention("flash", 1.0, 0)["fullname"]
NAIVE = attention("naive", 1.0, 0)["fullname"]


def verdicts(baselines, current, confirmation=None) -> dict:
    """The judge's verdict per benchmark name."""
    from perfgate.verdict import judge

    return {r.name: r.verdict for r in judge(baselines, current, None, confirmation)}


# --- synthetic histories for the triage tools (steps, dashboard) -------------------------------

HISTORY_KEY = "Synthetic-CPU-2cores"
STEPPED = "test_kernel[cpu-stepped]"
FLAT = "test_kernel[cpu-flat]"


def history_run_json(number: int, medians: dict[str, float], torch: str, rng) -> dict:
    """One run: per benchmark 9 rounds spread 1 % around its median, a fraction_of_copy its test
    declares a ratio (``COPY_FRACTION``, in family "history") and a speedup it does not."""
    benchmarks = []
    for name, median in medians.items():
        rounds = median * (1 + 0.01 * rng.standard_normal(9))
        rounds[4] = median
        benchmarks.append(
            {
                "name": name,
                "fullname": f"perf_tests/test_synthetic.py::{name}",
                "group": "synthetic",
                "params": {},
                "stats": {"median": float(np.median(rounds)), "data": rounds.tolist()},
                "extra_info": {
                    "fraction_of_copy": 0.5 * 1e-3 / median,
                    "device": "cpu",
                    "speedup_undeclared": 2.0,
                    "perfgate": {"family": "history", "ratios": [COPY_FRACTION.as_json()]},
                },
            }
        )
    software = {"python": "3.11", "torch": torch, "triton": "3.6.0"}
    return {
        "machine_info": {"perfgate": {"hardware_key": HISTORY_KEY, "software": software}},
        "commit_info": {"id": f"{number:04d}" + "c0ffee" * 6},
        "datetime": f"2026-11-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00",
        "benchmarks": benchmarks,
    }


def write_history(root: Path, runs: int = 24, step_at: int = 12, seed: int = 0) -> Path:
    """``runs`` saved runs under root/HISTORY_KEY: STEPPED is 10 % slower from ``step_at`` on (1 %
    run-to-run noise), FLAT never changes; torch changes at run ``runs - 6``. Returns the
    hardware folder."""
    rng = np.random.default_rng(seed)
    folder = root / HISTORY_KEY / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    for i in range(runs):
        noise = 1 + 0.01 * rng.standard_normal(2)
        medians = {
            STEPPED: 1e-3 * (1.10 if i >= step_at else 1.0) * noise[0],
            FLAT: 2e-3 * noise[1],
        }
        torch = "2.13.0" if i < runs - 6 else "2.14.0"
        data = history_run_json(i, medians, torch, rng)
        (folder / f"{i + 1:04d}_nightly.json").write_text(json.dumps(data))
    return folder


# --- pytester projects and what they print ---------------------------------------------------

# Benchmarks whose durations the test controls exactly: pytest-benchmark reads a virtual clock
# (--benchmark-timer) that the work advances by PERFGATE_WORK_SECONDS, +-5 % seeded noise, so the
# gate sees the same samples on any machine, loaded or not.
VIRTUAL_CLOCK = """
import os, random

now = 0.0
noise = random.Random(0)

def clock():
    return now

def work():
    global now
    now += float(os.environ["PERFGATE_WORK_SECONDS"]) * (0.95 + 0.1 * noise.random())
"""


BENCHMARK = """
from pathlib import Path

from virtual_clock import work

def test_work(benchmark):
    Path("ran").write_text("yes")
    benchmark.pedantic(work, rounds=20, iterations=1, warmup_rounds=1)
"""


def virtual_clock_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, **files: str
) -> pytest.Pytester:
    """A project of ``files`` timed on the virtual clock, each work() call 2 ms."""
    pytester.makepyfile(virtual_clock=VIRTUAL_CLOCK, **files)
    monkeypatch.setenv("PERFGATE_WORK_SECONDS", "0.002")
    # under pytest-xdist the inner pytest would inherit these and disable its benchmarks
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return pytester


# this repository's configuration (pyproject.toml): perfgate on, runs in baselines/<hardware>/;
# tests/test_plugin_outside.py runs the plugin as another project meets it
PLUGINS = ("-p", "perfgate.plugin", "-p", "no:cacheprovider", "-o", "perfgate=true",
           "-o", "perfgate_baselines=baselines")  # fmt: skip


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    clock = (
        ["--benchmark-timer=virtual_clock.clock"]
        if (pytester.path / "virtual_clock.py").exists()
        else []
    )
    return pytester.runpytest_subprocess(*PLUGINS, *clock, *args)


def saved_runs(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").rglob("*.json"))


def assert_cannot_gate(result: pytest.RunResult, *lines: str) -> None:
    """Exit 6, the given line(s) said, no traceback and no INTERNALERROR."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == GATE_NOT_RUN, output
    for line in lines:
        assert line in output, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output


def assert_one_line(result: pytest.RunResult, ret: int, line: str) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == ret, output
    assert line in output, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return output


def mount(*arguments: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *arguments], capture_output=True).returncode == 0


AB_CLOCK = "--benchmark-timer=virtual_clock.clock"
# a git project's clock (AB_CLOCK): a call advances it by the cost in cost.txt, +-2 % unseeded
# noise, so its blocks differ as real sessions do
COST_CLOCK = """
import random
from pathlib import Path

now = 0.0

def clock():
    return now

def work():
    global now
    cost = float((Path(__file__).parent / "cost.txt").read_text())
    now += cost * (0.98 + 0.04 * random.random())
"""
COST_BENCHMARK = """
from virtual_clock import work

def test_work(benchmark):
    benchmark.pedantic(work, rounds=10, iterations=1, warmup_rounds=0)
"""


def cost_project(root: Path) -> Path:
    """A git repository at ``root`` whose first commit costs 1 ms per call (``COST_CLOCK``)."""
    (root / "perf_tests").mkdir(parents=True)
    (root / "virtual_clock.py").write_text(COST_CLOCK)
    (root / "perf_tests" / "test_work.py").write_text(COST_BENCHMARK)
    (root / "cost.txt").write_text("0.001")
    git(root, "init", "-q")
    git(root, "commit", "-q", "--allow-empty", "-m", "0")
    commit(root, "base")
    return root


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


def worktrees(root: Path) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


# Each call of work(case) advances the clock by a duration drawn from (case, call number) only,
# in multiples of 2**-20 s (exact in a float): a case reads the same samples in any process and
# any order. PERFGATE_SLOW_CASE makes one case 1.5 times slower.
CASE_CLOCK = """
import os, random

now = 0.0
calls = {}

def clock():
    return now

def work(case):
    global now
    calls[case] = calls.get(case, 0) + 1
    noise = random.Random(f"{case}-{calls[case]}").randrange(200)
    slow = 1.5 if os.environ.get("PERFGATE_SLOW_CASE") == case else 1.0
    now += (2000 + noise) * slow * 2.0**-20
"""


CASES = """
import pytest

from perfgate import Ratio
from virtual_clock import work

@pytest.mark.perfgate(ratios=[Ratio("time relative to a", key="case", reference="a",
                                    higher_is_better=False)])
@pytest.mark.parametrize("case", ["a", "b", "c"])
def test_first(benchmark, case):
    benchmark.pedantic(work, args=(case,), rounds=20, iterations=1, warmup_rounds=1)

@pytest.mark.parametrize("case", ["d", "e"])
def test_second(benchmark, case):
    benchmark.pedantic(work, args=(case,), rounds=20, iterations=1, warmup_rounds=1)
"""


def make_cases_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Five benchmark cases of two test functions on the exact virtual clock."""
    pytester.makepyfile(virtual_clock=CASE_CLOCK, test_cases=CASES)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PERFGATE_SLOW_CASE", raising=False)
    return pytester


def run_cases(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGINS, "--benchmark-timer=virtual_clock.clock", *args)


def samples(path) -> dict[str, list[float]]:
    data = json.loads(path.read_text())
    return {b["fullname"]: b["stats"]["data"] for b in data["benchmarks"]}


def report_verdicts(path) -> dict[str, str]:
    """name -> verdict of a gate.json, read through its one reader."""
    from perfgate.verdict.rows import from_json

    return {row.name: str(row.verdict) for row in from_json(json.loads(path.read_text()))}


def shard_run(index: int, count: int, names: list[str], key="KEY", commit="abc") -> dict:
    entries = [{"name": n, "fullname": f"t.py::{n}", "params": {}, "group": None, "extra_info": {},
                "stats": {"median": 1.0, "data": [1.0, 1.0]}} for n in names]  # fmt: skip
    shard = {"index": index, "count": count}
    return {"machine_info": {"perfgate": {"hardware_key": key, "shard": shard}},
            "commit_info": {"id": commit}, "benchmarks": entries,
            "datetime": "2026-11-20T10:00:00+00:00"}  # fmt: skip


TIMED_CASE = """
import os

import torch

from perfgate.measure.timing import Budget, time_wall
from virtual_clock import work

x = torch.randn(64, 64)


def call():
    work()
    y = x @ x
    if os.environ.get("EXTRA_SORT"):
        torch.sort(y, dim=-1)


def test_plain(benchmark):  # a plain call running no operator: a cProfile profile
    benchmark.pedantic(work, rounds=5)


def test_case(benchmark):
    facts = time_wall(benchmark, call, torch.device("cpu"), Budget(case_seconds=0.1))
    benchmark.extra_info.update(facts)
"""


COUNTED_CASE = """
import os

from perfgate import _pytest_benchmark
from perfgate.measure import mode
from virtual_clock import work


def test_model(benchmark):
    now = mode.of(benchmark)  # what time_wall does on CUDA, the trace replaced by a fake
    if now.counting:
        launches = int(os.environ["FAKE_LAUNCHES"])
        now.counts[benchmark.fullname] = {"kernel_launches": launches}
        _pytest_benchmark.mark_not_timed(benchmark)
        return
    now.countable.add(benchmark.fullname)
    benchmark.extra_info["host_bound"] = True
    benchmark.pedantic(work, rounds=20, iterations=1, warmup_rounds=1)
"""


# The UUIDs of a fake host's GPUs in NVML's order (PCI bus order): NVML's "GPU-<uuid>" form.
HOST_UUIDS = [
    "GPU-90e5c3a1-7d2b-4e8f-a1b2-c3d4e5f60001",
    "GPU-5f11b2c4-8e3a-4f9b-b2c3-d4e5f6a70002",
    "GPU-2a7de913-1b4c-4a0d-83e4-f5a6b7c80003",
    "GPU-c4b80e52-2c5d-4b1e-94f5-a6b7c8d90004",
    "GPU-e1f3a6d7-3d6e-4c2f-a506-b7c8d9e00005",
    "GPU-7b02f4e8-4e7f-4d30-b617-c8d9e0f10006",
    "GPU-3c9e5a0b-5f80-4e41-8728-d9e0f1a20007",
    "GPU-d85a1c6f-6091-4f52-9839-e0f1a2b30008",
]

# The functions and constants perfgate uses, with the names nvidia-ml-py gives them. Module
# attributes in capitals steer it (a host of GPUS, one by default); CALLS records what was asked.
FAKE_PYNVML = (
    f"GPUS = {HOST_UUIDS[:1]!r}  # the host's GPUs in NVML's order\n"
    + """
NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 2, 3, 4
NVML_ERROR_NOT_FOUND = 6
NVML_CLOCK_LIMIT_ID_TDP = 0xFFFFFF01
MIG_INSTANCES = []  # "MIG-<uuid>" of MIG instances on the host
SM_CLOCKS = [1980]  # readings of the SM clock (the last one repeats)
SM_CLOCK_OF = {}  # NVML index -> that GPU's steady SM clock, instead of SM_CLOCKS
THROTTLE = 0x4
LOCK_ERROR = None
INIT_ERROR = None
PROCESSES = []  # (pid, MiB, NVML index of its GPU)
CALLS = []


class NVMLError(Exception):
    def __init__(self, value):
        self.value = value

    def __str__(self):
        return {3: "Not Supported", 4: "Insufficient Permissions"}.get(self.value, "Unknown")


class _Record:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def nvmlInit():
    if INIT_ERROR is not None:
        raise NVMLError(INIT_ERROR)


def nvmlDeviceGetCount():
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= index < len(GPUS):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return ("gpu", index)


def nvmlDeviceGetHandleByUUID(uuid):
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    if uuid in GPUS:
        return ("gpu", GPUS.index(uuid))
    if uuid in MIG_INSTANCES:
        return ("mig", uuid)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetUUID(handle):
    return GPUS[handle[1]].encode() if handle[0] == "gpu" else handle[1].encode()


def nvmlDeviceGetIndex(handle):
    return handle[1]


def nvmlDeviceGetClockInfo(handle, kind):
    if kind == NVML_CLOCK_SM and handle[1] in SM_CLOCK_OF:
        return SM_CLOCK_OF[handle[1]]
    if kind == NVML_CLOCK_SM:
        return SM_CLOCKS.pop(0) if len(SM_CLOCKS) > 1 else SM_CLOCKS[0]
    return 2619


def nvmlDeviceGetMaxClockInfo(handle, kind):
    return 1980


def nvmlDeviceGetPowerUsage(handle):
    return 312_500  # mW


def nvmlDeviceGetTemperature(handle, sensor):
    return 41


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    return THROTTLE


def nvmlDeviceGetName(handle):
    return b"NVIDIA H100 80GB HBM3"


def nvmlSystemGetDriverVersion():
    return "580.159.04"


def nvmlDeviceGetUtilizationRates(handle):
    return _Record(gpu=7, memory=1)


def nvmlDeviceGetComputeRunningProcesses(handle):
    return [_Record(pid=pid, usedGpuMemory=mib * 2**20) for pid, mib, gpu in PROCESSES
            if ("gpu", gpu) == handle]


def nvmlDeviceSetGpuLockedClocks(handle, low, high):
    CALLS.append(("lock", low, high))
    if LOCK_ERROR is not None:
        raise NVMLError(LOCK_ERROR)


def nvmlDeviceResetGpuLockedClocks(handle):
    CALLS.append(("reset",))
"""
)


def install_fake_pynvml(
    monkeypatch: pytest.MonkeyPatch, gpus: int = 1, **settings
) -> types.ModuleType:
    """A fake ``pynvml`` imported from now on: a host of ``gpus`` GPUs (HOST_UUIDS), steered by
    ``settings`` (FAKE_PYNVML's capitals); perfgate's NVML state starts afresh."""
    from perfgate.measure import nvml

    module = types.ModuleType("pynvml")
    exec(FAKE_PYNVML, module.__dict__)
    module.GPUS = HOST_UUIDS[:gpus]
    module.__dict__.update(settings)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(nvml, "_key", 0)  # unselected, as a fresh process
    nvml.forget()
    return module


class FakeCuda:
    """``torch.cuda`` of a process whose CUDA devices are the GPUs of ``uuids``, in CUDA's order
    (what CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER left it); torch's UUID has no "GPU-"."""

    def __init__(self, uuids: list[str], name: str = "NVIDIA H100 80GB HBM3"):
        self.uuids, self.name, self.current = list(uuids), name, 0

    def is_available(self) -> bool:
        return bool(self.uuids)

    def device_count(self) -> int:
        return len(self.uuids)

    def current_device(self) -> int:
        return self.current

    def set_device(self, index: int) -> None:
        self.current = index

    def get_device_name(self, index: int) -> str:
        return self.name

    def get_device_properties(self, index: int):
        bare = self.uuids[index].split("-", 1)[1]  # torch's _CUuuid: str() without the prefix
        return types.SimpleNamespace(uuid=uuid.UUID(bare))


def full_disk(monkeypatch: pytest.MonkeyPatch, under: Path, writes: int = 0) -> None:
    """The disk under ``under`` fills up: after ``writes`` whole writes there, a write lands in
    part (half its bytes) and fails with ENOSPC, as every later one does. Covers
    ``Path.write_text`` and ``os.write`` (perfgate's whole-file writers); Linux (/proc)."""
    import errno

    left = [writes]
    under = Path(under).resolve()

    def full(where: str) -> bool:
        if under not in Path(where).resolve().parents:
            return False
        left[0] -= 1
        return left[0] < 0

    def enospc(where: str) -> OSError:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), where)

    write_text, write = Path.write_text, os.write

    def fake_write_text(self, data, *args, **kwargs):
        if full(str(self)):
            write_text(self, data[: len(data) // 2], *args, **kwargs)
            raise enospc(str(self))
        return write_text(self, data, *args, **kwargs)

    def fake_write(descriptor, data):
        where = os.readlink(f"/proc/self/fd/{descriptor}")
        if full(where):
            write(descriptor, bytes(data[: len(data) // 2]))
            raise enospc(where)
        return write(descriptor, data)

    monkeypatch.setattr(Path, "write_text", fake_write_text)
    monkeypatch.setattr(os, "write", fake_write)
