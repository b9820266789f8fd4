"""``--perf-gate`` inside a pytest session: check that there is something to gate before the run,
judge after it (``verdict.judge``, the path ``perfgate compare`` uses too), re-run what looks
slower, count launches, profile what is confirmed, report, and set the exit status. The steps
are plain methods; ``perfgate/plugin.py`` calls them, in its one order of the passes after the
main loop. The gate never changes a run it judged: what it learns after judging (launch counts,
profiles) makes a new ``Run`` (``with_info``).

Exit status: 1 for a confirmed regression; GATE_NOT_RUN (6) when the gate could not run or gated
nothing, with one line saying why and what to do; FIRST_BASELINE (8) when it saved the first
baseline (0 with ``--perf-first-baseline``).
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from perfgate import _pytest_benchmark, outputs
from perfgate.benchmark import Run, run_from_json
from perfgate.fields import Declared, Field
from perfgate.measure import launch_counts
from perfgate.measure.mode import Mode
from perfgate.options import Options
from perfgate.session.baseline import (
    FIRST_BASELINE,
    GATE_NOT_RUN,
    BaselineChoice,
    node_id_from_here,
)
from perfgate.session.declarations import declarations, test_name, uses_benchmark
from perfgate.session.reruns import count_launches, run_again, say
from perfgate.session.saver import Saver
from perfgate.session.sharding import ShardSelection
from perfgate.verdict import summary
from perfgate.verdict.judge import GateResult, Verdict, failed, judge, rerun_names
from perfgate.verdict.pairing import declarations_of
from perfgate.verdict.thresholds import Thresholds


def ab_hint(
    regressed: set[str], baseline_commit: str | None, here: Callable[[str], str] = str
) -> str | None:
    """The ``perfgate ab`` command that re-runs exactly the regressed cases (their node ids, as
    ``here`` words them from where the session ran: not every parametrization of their
    functions) against the baseline's commit in alternating blocks (drift between sessions
    cancels there); each argument quoted for a shell (a node id holds ``[...]``, maybe spaces)."""
    if not regressed or not baseline_commit:
        return None
    tests = [here(name) for name in sorted(regressed)]
    command = ["perfgate", "ab", baseline_commit[:12], "--tests", *tests]
    return (
        "perfgate gate: to confirm across sessions, run the baseline's commit and this tree in "
        f"alternating blocks: {shlex.join(command)}"
    )


def with_info(run: Run, key: str, values: dict[str, object]) -> Run:
    """A new ``run`` whose named benchmarks hold ``extra_info[key]`` (name -> value); the
    judged run stays as it was (the model is frozen)."""
    if not values:
        return run
    benchmarks = dict(run.benchmarks)
    for name, value in values.items():
        before = benchmarks[name]
        benchmarks[name] = replace(before, extra_info={**before.extra_info, key: value})
    return replace(run, benchmarks=benchmarks)


@dataclass(frozen=True)
class Rerun:
    json: dict  # as pytest-benchmark writes a run: a pytest-xdist worker sends it
    run: Run


@dataclass
class GateSession:
    """The gate's state for one pytest session (``--perf-gate``); its steps, in plugin.py's order:
    ``check`` (collection), then after the main loop ``current`` -> ``confirm`` ->
    ``count_launches`` -> ``profile_confirmed`` -> ``conclude``; ``summary`` and ``exit_status``."""

    config: pytest.Config
    options: Options
    choice: BaselineChoice
    saver: Saver
    thresholds: Thresholds
    mode: Mode
    shard: ShardSelection | None  # --perf-shard: the other parts' cases are not judged here
    lines: list[str] = field(default_factory=list)
    problem: str | None = None
    results: list[GateResult] = field(default_factory=list)
    confirmation_json: dict | None = None

    def check(self, items: list[pytest.Item]) -> None:
        """Before the run (after -k/-m and shard selection): something to gate, or ``problem``
        and no items; or, with no baseline yet and a save asked, the first baseline to record."""
        if self.choice.first:
            status = f"exit {0 if self.options.first_baseline else FIRST_BASELINE}"
            self.lines = [
                f"perfgate gate: nothing to gate yet: {self.choice.first}; this run is saved as "
                f"the first baseline, which the next --perf-gate compares with ({status})"
            ]
            return
        known = set()
        for item in items:
            known.add(test_name(item))
            known.add(declarations(item).get(Declared.FAMILY) or "")
        self.problem = self._cannot_gate(items, known)
        if self.problem:
            self.config.hook.pytest_deselected(items=list(items))
            items.clear()

    def _cannot_gate(self, items: list[pytest.Item], known: set[str]) -> str | None:
        unknown = self.thresholds.unknown_names(known)
        if unknown:
            valid = ", ".join(sorted(name for name in known if name))
            return (
                f"--perf-gate-threshold names no family or test here: {', '.join(unknown)}; "
                f"valid names: {valid}"
            )
        if _pytest_benchmark.disabled(self.config):
            return "benchmarks are not timed here (--benchmark-disable): run the gate without them"
        benchmarks = [item.nodeid for item in items if uses_benchmark(item)]
        baseline = self.choice.baseline.benchmarks
        if not any(name in baseline for name in benchmarks):
            return (
                f"none of the {len(benchmarks)} selected benchmarks is in the baseline "
                f"{self.choice.baseline.path} ({len(baseline)} benchmarks): check -k/-m, the "
                "test paths and the project's own options, or record a baseline for this selection"
            )
        return None

    def not_run(self) -> None:
        """Tests failed or the session stopped: nothing is judged."""
        if not self.problem:
            self.lines = ["perfgate gate: not run, because tests failed or the session stopped"]

    def current(self, session: pytest.Session) -> Run | None:
        """The run to judge (None: nothing to judge, ``problem`` or the first save says why)."""
        if self.problem or self.choice.first:
            return None
        return _pytest_benchmark.current_run(self.config)

    def confirm(self, session: pytest.Session, current: Run) -> Run | None:
        """Judge; re-run what looks slower: the re-runs (their JSON in ``confirmation_json``)."""
        self.results = self.judged(current)
        if not any(r.verdict is Verdict.UNCONFIRMED for r in self.results):
            return None
        names = rerun_names(self.results, current, declarations_of(current))
        say(self.config, f"perfgate gate: re-running {len(names)} benchmarks to confirm")
        rerun = self.rerun(session, names)
        self.confirmation_json = rerun.json
        self.results = self.judged(current, rerun.run)
        return rerun.run

    def count_launches(self, session: pytest.Session, current: Run, confirmation) -> Run:
        """``current`` with the launch counts of its wall-timed CUDA cases, judged again. After
        the re-runs: profiling leaves CUPTI attached, which would slow their timings."""
        counts = count_launches(session, self.mode, set(current.benchmarks))
        if not counts:
            return current
        current = with_info(current, launch_counts.KEY, counts)
        self.results = self.judged(current, confirmation)
        return current

    def profile_confirmed(self, session: pytest.Session, current: Run, confirmation) -> Run:
        """``current`` with a profile of each confirmed regression (judged again in
        ``conclude``: now with the kernel diff). A counted case shows its function diff instead;
        one timed in rounds (``timing.time_rounds``) is never profiled."""
        regressed = {r.name for r in self.results if r.verdict is Verdict.REGRESSION}
        timed = {n for n in regressed if not current.benchmarks[n].counted}
        timed &= self.mode.profilable
        if not timed:
            return current
        self.profile(session, timed)
        profiles = {name: self.mode.profiles[name] for name in timed & set(self.mode.profiles)}
        return with_info(current, Field.PROFILE, profiles)

    def conclude(self, current: Run, confirmation: Run | None) -> None:
        """The final verdict on ``current``: summary, reports, and what the exit status says."""
        members = self.choice.members
        self.results = self.judged(current, confirmation)
        regressed = {r.name for r in self.results if r.verdict is Verdict.REGRESSION}
        changes = summary.environment_difference(members[-1], current)
        self.lines = summary.terminal_lines(self.results, changes, self.choice.label)
        timed = not self.options.instructions  # a count needs no confirming across sessions
        here = functools.partial(node_id_from_here, self.config)
        if timed and (hint := ab_hint(regressed, members[-1].commit, here)):
            self.lines.append(hint)
        self.write_reports(changes)
        if not any(r.verdict.gated for r in self.results):
            self.problem = (
                "nothing was gated: every benchmark that ran was skipped, new, undecided or not "
                "gated (see the reasons above); fix those or record a baseline for this selection"
            )
        self.saver.gate_failed = failed(self.results)

    def judged(self, current: Run, confirmation: Run | None = None) -> list[GateResult]:
        """The verdicts on this session's cases (a shard's: of its part of the matrix only)."""
        results = judge(self.choice.members, current, self.thresholds, confirmation)
        elsewhere = self.shard.elsewhere if self.shard is not None else set()
        return [r for r in results if r.name not in elsewhere]

    def write_reports(self, changes: list) -> None:
        report = self.options.report
        twin = outputs.gate_twin(report)
        try:  # checked before the run; a disk that filled up since is one line, not a traceback
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(summary.markdown(self.results, changes, self.choice.label, str(twin)))
            twin.write_text(json.dumps(summary.as_json(self.results), indent=2))
        except OSError as error:
            self.lines.append(
                f"perfgate gate: could not write {error.filename or twin}: "
                f"{error.strerror}; the summary above is all there is"
            )
            return
        self.lines.append(f"perfgate gate: summary written to {report} and {twin}")

    def rerun(self, session: pytest.Session, names: set[str]) -> Rerun:
        """Run the named items again; their results, kept out of the saved run."""
        start = _pytest_benchmark.result_count(self.config)
        run_again(session, names)
        taken = _pytest_benchmark.take_json_since(self.config, start)
        return Rerun(taken, run_from_json(taken, None))

    def profile(self, session: pytest.Session, names: set[str]) -> None:
        folder = self.options.report.parent / "profile"
        say(
            self.config,
            f"perfgate gate: profiling {len(names)} confirmed regressions into {folder}",
        )
        with self.mode.switched(profile_dir=folder):
            self.rerun(session, names)

    def summary(self) -> list[str]:
        """The lines of the terminal's "perfgate gate" section."""
        lines = list(self.lines)
        if self.problem:
            lines.append(f"perfgate gate could not run: {self.problem} (exit {GATE_NOT_RUN})")
        return lines

    def exit_status(self, session: pytest.Session) -> None:
        if session.exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR):
            return
        if self.choice.first:  # a failed test, or a save that failed (7), says more than 8
            if session.exitstatus == pytest.ExitCode.OK and not self.options.first_baseline:
                session.exitstatus = FIRST_BASELINE
            return
        if self.problem:
            session.exitstatus = GATE_NOT_RUN
        elif failed(self.results):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
