"""The built wheel is a pytest plugin: installed in a fresh virtual environment, it gates a project
that holds one benchmark file and no conftest. It ships perfgate/ only, and loads once whether it
comes from its entry point, from our checkout's conftest, or from both."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# A user's benchmark file. It times on a clock that moves only by what `work` costs (and a
# microsecond per reading, its resolution), not on the wall clock: on a CI machine shared with
# other jobs, wall-clock medians of one and the same code differ by far more than 10 %.
BENCHMARK_FILE = """\
import random

import pytest

COST_S = {cost_s}
clock_s = [0.0]
spread = random.Random(0)


def fake_clock():
    clock_s[0] += 1e-6
    return clock_s[0]


def work():
    clock_s[0] += COST_S * spread.uniform(0.99, 1.01)


@pytest.mark.benchmark(timer=fake_clock)
def test_work(benchmark):
    benchmark(work)
"""
COST_S = 0.002
# what a copy of the checkout leaves out: build outputs (perfgate.egg-info would make the copy's
# perfgate look installed), environments, and data that the build does not read
NOT_SOURCE = (
    *(".git", ".tox", ".venv", "*.egg-info", "build", "dist", "__pycache__"),
    *("perfgate-results", "baselines", "docs"),
)


def copy_of_checkout(destination: Path) -> Path:
    shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    return destination


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """perfgate's wheel, built as a release would be (an sdist, then the wheel from it), from a
    copy of the checkout, so that the build leaves nothing in ours."""
    source = copy_of_checkout(tmp_path_factory.mktemp("source") / "perfgate")
    out = tmp_path_factory.mktemp("dist")
    run_checked(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)]
    )
    return next(out.glob("perfgate-*.whl"))


def clean_environment() -> dict[str, str]:
    """This process's environment without PYTHONPATH (which may name our checkout) and pytest's
    own variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}


def run_checked(command: list[str]) -> None:
    result = subprocess.run(
        command, env=clean_environment(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}{result.stderr}"


@pytest.fixture
def bare_venv(tmp_path: Path) -> Path:
    """A new virtual environment that sees this one's packages (torch, pytest-benchmark, ...)
    but not perfgate, so nothing is downloaded: a .pth file names a folder of links to them."""
    venv = tmp_path / "venv"
    run_checked([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    packages = tmp_path / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if "perfgate" not in entry.name:  # tox installs perfgate here, editable
            (packages / entry.name).symlink_to(entry)
    venv_python = python_of(venv)
    site = subprocess.check_output(
        [venv_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    )
    (Path(site.decode().strip()) / "packages.pth").write_text(f"{packages}\n")
    return venv


@pytest.fixture
def installed_venv(bare_venv: Path, wheel: Path) -> Path:
    run_checked([sys.executable, "-m", "pip", "--python", python_of(bare_venv), "install",
                 "--no-deps", "--no-index", str(wheel)])  # fmt: skip
    return bare_venv


def python_of(venv: Path) -> str:
    return str(venv / "bin" / "python")


def pytest_in(venv: Path, directory: Path, *args: str, pythonpath: Path | None = None):
    """Runs pytest of ``venv`` in ``directory``. Without ``pythonpath`` it runs isolated (-I), so
    ``perfgate`` can only come from the venv, never from the current directory."""
    environment = clean_environment()
    isolation = ["-I"]
    if pythonpath is not None:
        environment["PYTHONPATH"] = str(pythonpath)
        isolation = []
    command = [python_of(venv), *isolation, "-m", "pytest", "-p", "no:cacheprovider", *args]
    result = subprocess.run(
        command, cwd=directory, env=environment, capture_output=True, text=True, timeout=300
    )
    return result.returncode, result.stdout + result.stderr


def test_wheel_ships_the_harness_with_its_entry_points_and_not_the_suite(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"perfgate", f"{wheel.name.split('-py3')[0]}.dist-info"}
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / "perfgate").rglob("*.py")}
    assert sources - set(names) == set(), "modules of perfgate/ missing from the wheel"
    entry_points = configparser.ConfigParser()
    entry_points.read_string(
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith("entry_points.txt")))
        .decode()
    )
    assert dict(entry_points["pytest11"]) == {"perfgate.plugin": "perfgate.plugin"}
    assert dict(entry_points["console_scripts"]) == {"perfgate": "perfgate.cli:main"}


def plugins_from_entry_points(output: str) -> str:
    """The header line where pytest names the distributions whose plugins it loaded."""
    return next(line for line in output.splitlines() if line.startswith("plugins:"))


# a perfgate option: pytest accepts it only if the plugin is loaded
COLLECT_OUR_TESTS = ("--collect-only", "--perf-tier", "quick", "tests/test_workflow.py")


def test_checkout_loads_the_plugin_through_its_conftest_without_installing(
    bare_venv: Path, tmp_path: Path
):
    checkout = copy_of_checkout(tmp_path / "checkout")
    code, output = pytest_in(bare_venv, checkout, *COLLECT_OUR_TESTS, pythonpath=checkout)
    assert code == 0, output
    assert "perfgate" not in plugins_from_entry_points(output)


def test_checkout_with_perfgate_installed_registers_the_plugin_once(
    installed_venv: Path, tmp_path: Path
):
    checkout = copy_of_checkout(tmp_path / "checkout")
    code, output = pytest_in(installed_venv, checkout, *COLLECT_OUR_TESTS)
    assert code == 0, output  # not "Plugin already registered under a different name"
    assert "perfgate-0.1.0" in plugins_from_entry_points(output)


# another project: its own --device option, warnings as errors, pytest-benchmark's conventions
PROJECT_CONFTEST = """\
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu")
"""
PROJECT_INI = "[pytest]\nfilterwarnings =\n    error\n"
COMPARE_FAIL = ("--benchmark-compare", "--benchmark-compare-fail=min:5%")


def other_project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "conftest.py").write_text(PROJECT_CONFTEST)
    (folder / "pytest.ini").write_text(PROJECT_INI)
    (folder / "test_work.py").write_text(BENCHMARK_FILE.format(cost_s=COST_S))
    return folder


def its_own_commands(venv: Path, project: Path) -> list[tuple[int, bool]]:
    """The project's own commands: exit status, and whether pytest-benchmark's lines showed."""
    benchmark = project / "test_work.py"
    benchmark.write_text(BENCHMARK_FILE.format(cost_s=COST_S))
    outcomes = []
    for args, line in [
        (("--device=cpu", "--benchmark-autosave"), "Saved benchmark data in"),
        (("--benchmark-min-rounds=3",), "test_work"),
        (("--fixtures",), "benchmark_weave"),
    ]:
        code, output = pytest_in(venv, project, *args)
        outcomes.append((code, line in output and "bench_device" not in output))
    benchmark.write_text(BENCHMARK_FILE.format(cost_s=5 * COST_S))
    code, output = pytest_in(venv, project, *COMPARE_FAIL)
    outcomes.append((code, "Performance has regressed" in output))
    return outcomes


@pytest.mark.slow
def test_installed_wheel_changes_nothing_until_asked_then_gates(
    bare_venv: Path, wheel: Path, tmp_path: Path
):
    project = other_project(tmp_path / "project")
    alone = its_own_commands(bare_venv, project)
    assert alone == [(0, True), (0, True), (0, True), (1, True)], alone
    run_checked([sys.executable, "-m", "pip", "--python", python_of(bare_venv), "install",
                 "--no-deps", "--no-index", str(wheel)])  # fmt: skip
    assert its_own_commands(bare_venv, project) == alone
    assert len(list((project / ".benchmarks").rglob("*.json"))) == 2
    assert not (project / "baselines").exists()

    benchmark = project / "test_work.py"
    benchmark.write_text(BENCHMARK_FILE.format(cost_s=COST_S))
    code, output = pytest_in(bare_venv, project, "--benchmark-save=base", "--benchmark-save-data")
    assert code == 0, output  # pytest-benchmark's own save, with the per-round data a gate reads
    [baseline] = (project / ".benchmarks").rglob("0003_base.json")
    code, output = pytest_in(bare_venv, project, "--perf-gate")
    assert code == 0 and baseline.name in output.split("perfgate gate", 1)[-1], output
    benchmark.write_text(BENCHMARK_FILE.format(cost_s=2 * COST_S))
    code, output = pytest_in(bare_venv, project, "--perf-gate")
    assert code == 1, output  # a confirmed regression (README: exit codes)
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert [line for line in output.splitlines() if "test_work" in line and "%" in line], output
