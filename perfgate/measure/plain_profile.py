"""Profiles of plain pytest-benchmark cases: a test's own ``benchmark(fn, ...)`` or
``benchmark.pedantic(...)`` call, with no ``measure.timing`` helper around it.

While a session profiles (``Mode.profiling``: ``--perf-profile``, the gate's profile of what it
confirmed, ``--perf-store-profiles``), the call is profiled instead of timed (``prepare``):

- where the process has imported torch, by torch.profiler (``measure.profiler``): operators' CPU
  time per call, and the bytes allocated under each (clock "cpu");
- where it has not, or the call ran no PyTorch operator, by cProfile (``python_profile``): each
  Python function's self time per call (clock "python"; builtins by name, the others as
  ``file.py:function``).

Either way the compact profile goes to ``Mode.profiles``, so the gate can name the operators or
functions a confirmed regression changed. Which plain cases are profiled at all: every case that
was timed, but those of ``timing.time_rounds`` (a fresh compile per round: ``Mode.unprofiled``).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from pathlib import Path

from perfgate import _pytest_benchmark
from perfgate.fields import PROFILE_ROWS, Clock, Field, Profile
from perfgate.measure import profiler
from perfgate.measure.mode import Mode
from perfgate.measure.target import Target


def prepare(benchmark, mode: Mode) -> None:
    """Before a benchmark test's body: while the session profiles, its plain benchmark call is
    profiled instead of timed (a ``measure.timing`` helper profiles before it makes one)."""
    if not mode.profiling():
        return

    def profile_instead(fn, args, kwargs, setup, teardown) -> object:
        target = Target(fn, args, kwargs, setup, teardown)
        result = target.run(1)  # the test gets a result, as from a timed call
        profile(benchmark, target, mode)
        return result

    _pytest_benchmark.count_instead(benchmark, profile_instead)


def note(benchmark, mode: Mode) -> None:
    """After a benchmark test's body: a case it timed can be profiled in a later pass."""
    if _pytest_benchmark.samples(benchmark) and benchmark.fullname not in mode.unprofiled:
        mode.profilable.add(benchmark.fullname)


def profile(benchmark, target: Target, mode: Mode, calls: int = profiler.PROFILED_CALLS) -> dict:
    """Profile ``target`` (torch.profiler where torch is imported and the call runs operators,
    else cProfile); its compact profile in ``mode.profiles``, its facts returned."""
    if "torch" in sys.modules:
        import torch

        device = torch.device("cuda" if torch.cuda.is_initialized() else "cpu")
        facts = profiler.profile_calls(benchmark, lambda: target.run(1), device, mode, calls)
        if mode.profiles[benchmark.fullname][Profile.TIME_US]:
            return facts
    return python_profile(benchmark, target, mode, calls)


def python_profile(benchmark, target: Target, mode: Mode, calls: int) -> dict:
    """``calls`` calls of ``target`` under cProfile (setup and teardown outside it): each
    function's self time in microseconds per call in ``mode.profiles``; with a profile folder,
    the top-20 table (``.txt``) and pstats' own file (``.prof``) there too."""
    recorder = cProfile.Profile()
    target.run(calls, recorder.enable, recorder.disable)
    stats = pstats.Stats(recorder)
    self_us: dict[str, float] = {}
    for (filename, _line, function), row in stats.stats.items():
        name = function if filename == "~" else f"{Path(filename).name}:{function}"
        self_us[name] = self_us.get(name, 0.0) + row[2] * 1e6  # row[2]: self seconds
    rows = sorted(self_us.items(), key=lambda item: -item[1])[:PROFILE_ROWS]
    cut = profiler.NAME_LENGTH
    mode.profiles[benchmark.fullname] = {
        Profile.CLOCK: Profile.PYTHON,
        "calls": calls,
        Profile.TIME_US: [[name[:cut], round(us / calls, 3)] for name, us in rows],
        Profile.ALLOCATED_BYTES: [],
    }
    _pytest_benchmark.mark_not_timed(benchmark)
    if (folder := mode.profile_dir) is None:
        return {Field.CLOCK: Clock.PROFILED}
    stem = profiler.file_stem(folder, benchmark)
    table = io.StringIO()
    pstats.Stats(recorder, stream=table).sort_stats("tottime").print_stats(20)
    Path(f"{stem}.txt").write_text(f"{benchmark.fullname}: {calls} calls\n{table.getvalue()}")
    stats.dump_stats(f"{stem}.prof")
    return {Field.CLOCK: Clock.PROFILED, Field.PROFILE: f"{stem}.txt"}
