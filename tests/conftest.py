"""Unit-test fixtures: Triton's interpreter on CPU-only machines, seeding, the devices, the one
rule for GPU tests (mark them ``gpu`` and they are skipped where there is no CUDA device), and the
fixtures several test modules share (a project on the virtual clock, a read-only disk)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
import scipy.stats  # noqa: F401  (see below)
import torch
from helpers import BENCHMARK, cost_project, mount, virtual_clock_project
from workflows import actionlint_runner

# Triton reads TRITON_INTERPRET when @triton.jit decorates a kernel, that is when kernels.* is
# imported, so it has to be set here, at conftest import time, before any test module loads.
if not torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "1"

CUDA_AVAILABLE = torch.cuda.is_available()

# perfgate imports scipy.stats only where it compares; pytester's in-process runs remove what a
# run imported from sys.modules afterwards, and numpy's extensions cannot be loaded twice in one
# process ("cannot load module more than once per process"): so this file imports it first.

# A runner that starts the tests in the background (nohup, `cmd &`) leaves SIGINT ignored, and
# children inherit that: the Ctrl-C tests (test_store_saving.py, test_cli_guard.py) then send an
# interrupt nobody receives. Handled here: children of this process start with SIGINT at its
# default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# py-cpuinfo measures the CPU in a Python process of its own, 0.4 s each time pytest-benchmark
# saves or compares: measured once here, read from a file by every child process
# (startup/sitecustomize.py)
if "PERFGATE_TEST_CPU_INFO" not in os.environ:  # an xdist worker inherits its controller's
    import cpuinfo

    _cpu_info = Path(tempfile.mkdtemp(prefix="perfgate-tests-")) / "cpu-info.json"
    _cpu_info.write_text(json.dumps(cpuinfo.get_cpu_info()), encoding="utf-8")
    os.environ["PERFGATE_TEST_CPU_INFO"] = str(_cpu_info)
    atexit.register(shutil.rmtree, _cpu_info.parent, ignore_errors=True)
    _paths = [str(Path(__file__).parent / "startup"), os.environ.get("PYTHONPATH")]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, _paths))

# "cpu" always (the Triton kernels run there through the interpreter); "cuda" only when present.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the slowest first: pytest-xdist hands out tests in this order as workers free up, so a
    # 30-80 s test started last no longer leaves the other worker idle at the end
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if CUDA_AVAILABLE:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed_torch() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device the kernels can run on here: cpu always, cuda when available (else skipped)."""
    return torch.device(request.param)


@pytest.fixture
def bench_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return virtual_clock_project(pytester, monkeypatch, test_bench=BENCHMARK)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git project whose cost per call a file sets (``helpers.cost_project``: ``perfgate ab``
    and ``nightly`` run it); the cwd is its root."""
    monkeypatch.chdir(cost_project(tmp_path / "repo"))
    return tmp_path / "repo"


@pytest.fixture(scope="session")
def actionlint(tmp_path_factory: pytest.TempPathFactory):
    """Lints a workflow file with the actionlint build tox -e lint pins (``workflows``)."""
    return actionlint_runner(tmp_path_factory)


@pytest.fixture
def read_only_disk(tmp_path: Path):
    """A read-only bind mount of a folder: a real EROFS, even for root."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if not mount("--bind", "-o", "ro", str(folder), str(folder)):
        pytest.skip("cannot bind-mount here (not root); the patched-disk test covers it")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)
