"""The counting process of ``perfgate.measure.callgrind``: its environment, interpreter and working
directory, made the same for every session."""

from __future__ import annotations

import compileall
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

# The counting process gets an environment built, not inherited: the same variables and values,
# paths of the same length wherever the checkout and its virtual environment lie, private and
# empty caches. A count depends on the layout of the process's heap (CPython's method cache is
# indexed by the address of the attribute's name, so a different layout means other
# collisions), and the heap's layout on everything the process did before counting: a warm
# Inductor cache skips compiling, a longer path allocates longer strings. One fresh-clone
# session once read +0.6 % on unchanged code (docs/gate-validation/instructions-session6/).
PASSED_VARIABLES = (
    "LD_LIBRARY_PATH",
    "PERFGATE_INJECT_INSTRUCTIONS",
    "PERFGATE_INJECT_MATCHING",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
)
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# Inductor builds its C++ kernels with -march=native: on a machine with AVX-512 they die under
# valgrind with SIGILL. On x86-64 the counting process builds them for the capability it counts.
X86_64_MARCH = {"AVX2": "x86-64-v3", "DEFAULT": "x86-64"}


def environment(root: Path, scratch: Path) -> dict[str, str]:
    """The counting process's variables; ``scratch`` is its private folder and working
    directory, where ``src`` links to ``root`` (on PYTHONPATH), and ``harness`` to the folder
    perfgate was imported from, where that is neither ``root`` nor an installed package (a
    checkout on the caller's PYTHONPATH: the counting process imports the same perfgate)."""
    from perfgate.measure.instructions import counted_capability

    capability = counted_capability()
    Path(scratch, "src").symlink_to(root.resolve(), target_is_directory=True)
    for folder in ("home", "tmp"):
        Path(scratch, folder).mkdir()
    tools = [
        str(Path(shutil.which(tool)).parent)
        for tool in ("valgrind", "callgrind_annotate")
        if shutil.which(tool)
    ]
    env = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    env.update(
        PATH=os.pathsep.join(dict.fromkeys([*tools, *SYSTEM_PATH])),
        PYTHONPATH=os.pathsep.join(_import_paths(root, scratch)),
        HOME=str(Path(scratch, "home")),
        TMPDIR=str(Path(scratch, "tmp")),
        LC_ALL="C",
        PYTHONHASHSEED="0",
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        TORCHINDUCTOR_COMPILE_THREADS="1",  # compile in-process, no worker pool under valgrind
        TORCHINDUCTOR_CACHE_DIR=str(Path(scratch, "tmp", "inductor")),
        TORCHINDUCTOR_FX_GRAPH_CACHE="0",  # compile every time: a cache hit skips work
        TORCHINDUCTOR_AUTOGRAD_CACHE="0",
        TRITON_CACHE_DIR=str(Path(scratch, "tmp", "triton")),
        ATEN_CPU_CAPABILITY=capability.lower(),
    )
    if platform.machine() == "x86_64" and capability in X86_64_MARCH:
        env["TORCHINDUCTOR_CPP_MARCH"] = X86_64_MARCH[capability]
    _compile_sources(root)
    return env


def _import_paths(root: Path, scratch: Path) -> list[str]:
    paths = [str(Path(scratch, "src"))]
    harness = Path(__file__).resolve().parents[2]  # the folder that holds perfgate/
    installed = harness.is_relative_to(Path(sys.prefix).resolve())
    if harness != root.resolve() and not installed:
        Path(scratch, "harness").symlink_to(harness, target_is_directory=True)
        paths.append(str(Path(scratch, "harness")))
    return paths


def scratch_parent() -> str | None:
    """Where the private folder goes: /tmp where it can be written, so that its path has the same
    length whatever TMPDIR the caller has; the caller's temporary folder otherwise."""
    return "/tmp" if os.access("/tmp", os.W_OK) else None


def python_in(scratch: Path) -> str:
    """This interpreter, called through a link in ``scratch`` to its virtual environment, so
    that sys.prefix and site-packages have the same length wherever the environment lies."""
    if sys.prefix == sys.base_prefix:  # not a virtual environment: the path is the system's
        return sys.executable
    Path(scratch, "venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    executable = Path(sys.executable)
    return str(Path(scratch, "venv", executable.parent.name, executable.name))


def _compile_sources(root: Path) -> None:
    """Write the bytecode of root's packages, so that the counting process always loads it
    (never compiles a first time in one session and loads it in the next)."""
    for package in sorted(root.iterdir()):
        if (package / "__init__.py").is_file():
            compileall.compile_dir(package, quiet=2)


def no_address_randomization() -> list[str]:
    """``setarch -R`` where it works (a container may forbid the personality call)."""
    if shutil.which("setarch") is None:
        return []
    done = subprocess.run(["setarch", "-R", "true"], capture_output=True)
    return ["setarch", "-R"] if done.returncode == 0 else []
