"""Every option perfgate adds to pytest (all ``--perf-*``), its two ini settings, and the one
question the plugin asks first: did this session ask for perfgate at all?

A session asks by giving any ``--perf-*`` option, or through its project's pytest configuration
(``perfgate = true``; this repository's pyproject.toml sets it). Unasked, perfgate changes
nothing: pytest-benchmark stores, compares and reports as if perfgate were not installed. This
module imports nothing but pytest and ``perfgate.arguments``, so an unasked session pays for
nothing else (a threshold's type imports the verdict's parser when one is given).

An option the command line shares (a threshold, the baseline root, a count) is declared once
in ``perfgate.arguments``, for pytest and the commands alike, and checked at the door.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from perfgate.arguments import add_baselines, add_count, add_thresholds, variable_name

if TYPE_CHECKING:
    from perfgate.verdict.thresholds import ThresholdSpec  # the type of a threshold given

GATE_REPORT = "perfgate-results/gate.md"
DEFAULT_CALLGRIND_REPEATS = 3
DEFAULT_CALLGRIND_LAYOUTS = 3  # counting processes, each with another heap layout (callgrind.py)
# registered in every session, so a project's marks never warn, asked or not
MARKERS = (
    "perfgate(family=None, threshold=None, ratios=()): experiment family, a regression threshold "
    "(a fraction, 0.1 = 10%) and same-run ratios (perfgate.Ratio) for the perfgate gate",
)
# option destination -> its default: a session that gives any other value asked for perfgate
DEFAULTS = {
    "perf_gate": False,
    "perf_first_baseline": False,
    "perf_gate_threshold": [],
    "perf_gate_report": GATE_REPORT,
    "perf_baselines": None,
    "perf_measure": "time",
    "perf_callgrind_repeats": DEFAULT_CALLGRIND_REPEATS,
    "perf_callgrind_layouts": DEFAULT_CALLGRIND_LAYOUTS,
    "perf_callgrind_env": [],
    "perf_profile": None,
    "perf_store_profiles": "saved",
    "perf_lock_clocks": False,
    "perf_shard": None,
}


def add(parser: pytest.Parser) -> None:
    parser.addini(
        "perfgate",
        type="bool",
        default=False,
        help="perfgate on for every session of this project: its store, per-round data and "
        "comparisons (--perf-gate still gates). Default: off until a --perf-* option is given",
    )
    parser.addini(
        "perfgate_baselines",
        default="",
        help="root of per-hardware baseline folders (<root>/<hardware key>/), relative to the "
        "ini file; default: pytest-benchmark's own storage (--benchmark-storage, .benchmarks)",
    )
    group = parser.getgroup(
        "perfgate", "perfgate regression gate (any --perf-* option turns it on)"
    )
    _add_gate(group)
    _add_store(group)
    _add_measure(group)
    _add_shard(group)


def _add_gate(group) -> None:
    group.addoption(
        "--perf-gate",
        action="store_true",
        help="gate on the newest saved run (implies --benchmark-compare): fail on confirmed, "
        "significant regressions (exit 1); exit 6 when nothing could be gated",
    )
    group.addoption(
        "--perf-first-baseline",
        action="store_true",
        help="with --perf-gate where this hardware has no baseline yet: save this run as the "
        "first (NNNN_first.json) and exit 0, not 8; where it has one, this saves nothing",
    )
    add_thresholds(
        group.addoption,
        "--perf-gate-threshold",
        "a test's @pytest.mark.perfgate(threshold=...), which wins, else from each case's "
        "measured noise (docs/reference/verdicts.md)",
    )
    group.addoption(
        "--perf-gate-report",
        default=GATE_REPORT,
        help=f"markdown summary of the gate; a JSON twin is written beside it (default: "
        f"{GATE_REPORT})",
    )


def _add_store(group) -> None:
    add_baselines(group.addoption, "--perf-baselines")
    group.addoption(
        "--perf-store-profiles",
        choices=("saved", "always", "never"),
        default="saved",
        help="store a compact profile with each timed case (torch.profiler; cProfile for a plain "
        "benchmark call that ran no PyTorch operator), taken after the whole session, so the "
        "gate can say which kernels or functions a later regression changed: saved (default: "
        "runs saved with --benchmark-save or --benchmark-autosave), "
        "always (also --benchmark-json), never",
    )


def _add_measure(group) -> None:
    group.addoption(
        "--perf-measure",
        choices=("time", "instructions"),
        default="time",
        help="time: time the benchmarks (default); instructions: count the instructions of "
        "each selected test's benchmark(...) call under callgrind instead (needs valgrind and "
        "a C compiler; choose the tests with -k or -m)",
    )
    add_count(group.addoption, "--perf-callgrind-repeats", DEFAULT_CALLGRIND_REPEATS, 2,
              "counted repeats per counted case (2 or more: the spread)")  # fmt: skip
    add_count(group.addoption, "--perf-callgrind-layouts", DEFAULT_CALLGRIND_LAYOUTS, 1,
              "callgrind processes run at once, each with another heap layout; a case keeps "
              "the fewest instructions of them")  # fmt: skip
    group.addoption(
        "--perf-callgrind-env",
        action="append",
        default=[],
        metavar="NAME",
        type=variable_name,
        help="a variable of this environment the counting processes also get (repeat for more); "
        "they run in an environment of their own, the same in every session, so a variable "
        "the tests read (a project's switch) must be named here",
    )
    group.addoption(
        "--perf-profile",
        default=None,
        metavar="DIR",
        help="profile each benchmark case instead of timing it: writes DIR/<test>.txt (top "
        "operators) and DIR/<test>.trace.json (Chrome trace) by torch.profiler, or the top "
        "Python functions and DIR/<test>.prof by cProfile for a call that ran no PyTorch operator",
    )
    group.addoption(
        "--perf-lock-clocks",
        action="store_true",
        help="lock the GPU clocks at base through NVML for the session and reset them after "
        "(needs perfgate[gpu] and root; where not allowed, says so and goes on). Default: off",
    )


def _add_shard(group) -> None:
    group.addoption(
        "--perf-shard",
        default=None,
        metavar="I/N",
        help="run part I of N of the collected cases (one CI runner of N), balanced by the "
        "durations in the newest saved run; join the parts with `perfgate merge`",
    )


def counting_spec() -> str | None:
    """The spec of this process where it is a callgrind counting process; None elsewhere."""
    from perfgate.fields import COUNTING_SPEC  # imported when asked: this module stays light

    return os.environ.get(COUNTING_SPEC)


def without_own(args: list[str]) -> list[str]:
    """A command line without perfgate's own options (and their values): what a pytest process
    that perfgate starts (the callgrind counting processes) is given of its caller's."""
    takes_value = {"--" + dest.replace("_", "-"): not isinstance(default, bool)
                   for dest, default in DEFAULTS.items()}  # fmt: skip
    kept, skip_next = [], False
    for arg in args:
        name = arg.split("=", 1)[0]
        if skip_next:
            skip_next = False
        elif name in takes_value:
            skip_next = takes_value[name] and "=" not in arg
        else:
            kept.append(arg)
    return kept


@dataclass(frozen=True)
class Options:
    """The ``--perf-*`` options of one session, read once (``read``) when it asked for perfgate."""

    gate: bool = False
    first_baseline: bool = False  # --perf-first-baseline: no baseline yet saves this run, exit 0
    thresholds: tuple[ThresholdSpec, ...] = ()  # checked at the door, as the user wrote them
    report: Path = Path(GATE_REPORT)
    measure: str = "time"
    callgrind_repeats: int = DEFAULT_CALLGRIND_REPEATS
    callgrind_layouts: int = DEFAULT_CALLGRIND_LAYOUTS
    callgrind_env: tuple[str, ...] = ()  # variables the counting processes are also given
    profile: Path | None = None
    store_profiles: str = "saved"
    lock_clocks: bool = False
    shard: str | None = None
    saves: bool = False  # --benchmark-save or --benchmark-autosave: the run is saved
    baselines: Path | None = None  # --perf-baselines as given (resolved); None: not given
    baselines_root: Path | None = None  # per-hardware folders' root; None: pytest-benchmark's

    @property
    def instructions(self) -> bool:
        """True for ``--perf-measure instructions``: only the counted cases, under their own key."""
        return self.measure == "instructions"

    @property
    def stores_profiles(self) -> bool:
        return self.store_profiles == "always" or (self.store_profiles == "saved" and self.saves)


def read(config: pytest.Config) -> Options:
    """This session's options (each value was checked where pytest parsed it)."""
    option = config.option
    given = _real(Path(option.perf_baselines).expanduser()) if option.perf_baselines else None
    return Options(
        gate=bool(option.perf_gate),
        first_baseline=bool(option.perf_first_baseline),
        thresholds=tuple(option.perf_gate_threshold or ()),
        report=Path(option.perf_gate_report),
        measure=option.perf_measure,
        callgrind_repeats=option.perf_callgrind_repeats,
        callgrind_layouts=option.perf_callgrind_layouts,
        callgrind_env=tuple(option.perf_callgrind_env),
        profile=Path(option.perf_profile) if option.perf_profile else None,
        store_profiles=option.perf_store_profiles,
        lock_clocks=bool(option.perf_lock_clocks),
        shard=option.perf_shard,
        saves=bool(getattr(option, "benchmark_save", None))
        or bool(getattr(option, "benchmark_autosave", None)),
        baselines=given,
        baselines_root=given or _configured_root(config),
    )


def asked(config: pytest.Config) -> bool:
    """True when this session turns perfgate on: a --perf-* option given (even at its default
    value, ``--perf-store-profiles=saved``), or ``perfgate = true``."""
    if config.getini("perfgate"):
        return True
    if any(getattr(config.option, dest, default) != default for dest, default in DEFAULTS.items()):
        return True
    given = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    given += config.getini("addopts")
    ours = {"--" + dest.replace("_", "-") for dest in DEFAULTS}
    return any(str(argument).split("=")[0] in ours for argument in given)


PATH_OPTIONS = ("--perf-baselines", "--perf-gate-report", "--perf-profile")


def check_given_apart(config: pytest.Config) -> None:
    """UsageError when a path option written apart from its value (``--perf-baselines DIR``)
    moved pytest's rootdir: pytest picks its rootdir and configuration file before it knows
    perfgate's options, taking DIR for a test path, so a DIR outside the project moves the rootdir
    up to a common ancestor (the project's own configuration unread, test ids changed)."""
    if config.option.rootdir or config.option.inifilename:
        return
    here = Path(os.path.realpath(config.invocation_params.dir))
    args = list(config.invocation_params.args)
    for flag, value in zip(args, args[1:], strict=False):
        path = here / os.path.expanduser(value)
        if flag not in PATH_OPTIONS or not path.exists() or _real(path).is_relative_to(here):
            continue
        ini, root = config.inipath, Path(os.path.realpath(config.rootpath))
        if (root != here) if ini is None else not here.is_relative_to(_real(ini.parent)):
            raise pytest.UsageError(
                f"{flag} {value}: write {flag}={value} (with '='): given apart, pytest took "
                f"{value} for a test path and chose the rootdir {root}, above this project "
                "(its pytest configuration unread)"
            )


def _configured_root(config: pytest.Config) -> Path | None:
    """The ini setting perfgate_baselines, from the ini file's folder; None where unset."""
    configured = config.getini("perfgate_baselines")
    if not configured:
        return None
    base = config.inipath.parent if config.inipath else config.rootpath
    return _real(base / os.path.expanduser(configured))


def _real(path: Path) -> Path:
    """The absolute path with symlinks followed; a symlink loop is left as it is (and named by
    whoever uses it), never a RuntimeError as ``Path.resolve`` raises on Python 3.11."""
    return Path(os.path.realpath(path))
