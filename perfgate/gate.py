"""``--perf-gate`` inside a pytest session: check that there is something to gate before the run,
judge after it (``verdict.judge``, the path ``perfgate compare`` uses too), re-run what looks
slower, profile what is confirmed, report, and set the exit status.

Exit status: 1 for a confirmed regression; GATE_NOT_RUN (6) when the gate could not run or gated
nothing, with one line saying why and what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfgate import _pytest_benchmark, options
from perfgate.benchmark import Run, run_from_json
from perfgate.declarations import declarations, test_name, uses_benchmark
from perfgate.measure import launch_counts
from perfgate.measure import profiler as profiling
from perfgate.measure.instructions import is_instructions
from perfgate.reruns import run_again, say
from perfgate.session import GATE_NOT_RUN, BaselineChoice, Saver
from perfgate.verdict import summary
from perfgate.verdict.judge import GateResult, Verdict, failed, judge, rerun_names
from perfgate.verdict.pairing import declarations_of
from perfgate.verdict.rules import Thresholds, parse_thresholds


def thresholds_from(config: pytest.Config) -> Thresholds:
    try:
        return parse_thresholds(config.getoption("--perf-gate-threshold"))
    except ValueError as error:
        raise pytest.UsageError(f"--perf-gate-threshold: {error}") from None


def ab_hint(regressed: set[str], baseline_commit: str | None, paths: str = "") -> str | None:
    """The ``perfgate ab`` command that re-runs the regressed tests (of the session's test
    ``paths``) against the baseline's commit in alternating blocks (drift between sessions
    cancels there)."""
    if not regressed or not baseline_commit:
        return None
    tests = sorted({name.split("::")[-1].split("[")[0] for name in regressed})
    where = f" --tests {paths}" if paths else ""
    return (
        "perfgate gate: to confirm across sessions, run the baseline's commit and this tree in "
        f"alternating blocks: perfgate ab {baseline_commit[:12]}{where} -k '{' or '.join(tests)}'"
    )


@dataclass(frozen=True)
class Rerun:
    json: dict  # as pytest-benchmark writes a run: a pytest-xdist worker sends it
    run: Run


class GateSession:
    """The gate's state for one pytest session; registered as a plugin when --perf-gate is on."""

    def __init__(
        self, config: pytest.Config, choice: BaselineChoice, saver: Saver, thresholds: Thresholds
    ):
        self.config, self.choice, self.saver = config, choice, saver
        self.thresholds = thresholds
        self.report_path = Path(config.getoption("--perf-gate-report"))
        self.declared: dict[str, dict] = {}
        self.lines: list[str] = []
        self.problem: str | None = None
        self.results: list[GateResult] = []
        self.confirmation_json: dict | None = None

    @pytest.hookimpl(trylast=True)  # after -k / -m deselection
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        known = set()
        for item in items:
            known.add(test_name(item))
            self.declared[item.nodeid] = declarations(item)
            known.add(self.declared[item.nodeid].get("family") or "")
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
                f"{self.choice.baseline.path} ({len(baseline)} benchmarks): check -k/-m, "
                "--device and --perf-tier, or record a baseline for this selection"
            )
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        if self.problem:
            return result
        if session.testsfailed or session.shouldfail or session.shouldstop:
            self.lines = ["perfgate gate: not run, because tests failed or the session stopped"]
        else:
            self.gate(session)
        return result

    def gate(self, session: pytest.Session) -> None:
        current = _pytest_benchmark.current_run(self.config)
        self.conclude(current, self.confirm(session, current))

    def confirm(self, session: pytest.Session, current: Run) -> Run | None:
        """Judge, re-run what looks slower, profile what is confirmed (into ``current``);
        returns the re-runs (their JSON in ``confirmation_json``)."""
        self.results, confirmation = self.judged(current), None
        if any(r.verdict is Verdict.UNCONFIRMED for r in self.results):
            names = rerun_names(self.results, current, declarations_of(current))
            say(self.config, f"perfgate gate: re-running {len(names)} benchmarks to confirm")
            confirmation = self.rerun(session, names)
            self.confirmation_json = confirmation.json
            confirmation = confirmation.run
            self.results = self.judged(current, confirmation)
        # launch counts last: profiling leaves CUPTI attached, which would slow re-runs' timings
        counts = launch_counts.count_cases(session, set(current.benchmarks))
        if counts:
            for name, value in counts.items():
                current.benchmarks[name].extra_info[launch_counts.KEY] = value
            self.results = self.judged(current, confirmation)
        regressed = {r.name for r in self.results if r.verdict is Verdict.REGRESSION}
        # a counted case shows its function diff instead; only measure.timing's cases profile
        timed = {n for n in regressed if not is_instructions(current.benchmarks[n].extra_info)}
        timed &= profiling.profilable
        if timed:
            self.profile(session, timed)
            for name in timed & set(profiling.collected):  # judged again: now with the diff
                current.benchmarks[name].extra_info["profile"] = profiling.collected[name]
        return confirmation

    def conclude(self, current: Run, confirmation: Run | None) -> None:
        """The final verdict on ``current``: summary, reports, and what the exit status says."""
        members = self.choice.members
        self.results = self.judged(current, confirmation)
        regressed = {r.name for r in self.results if r.verdict is Verdict.REGRESSION}
        changes = summary.environment_difference(members[-1], current)
        self.lines = summary.terminal_lines(self.results, changes, self.choice.label)
        if hint := ab_hint(regressed, members[-1].commit, options.test_paths(self.config)):
            self.lines.append(hint)
        self.write_reports(changes)
        if not any(r.verdict.gated for r in self.results):
            self.problem = (
                "nothing was gated: every benchmark that ran was skipped, new, or not gated "
                "(see the reasons above); fix those or record a baseline for this selection"
            )
        self.saver.gate_failed = failed(self.results)

    def judged(self, current: Run, confirmation: Run | None = None) -> list[GateResult]:
        """The verdicts on this session's cases (a shard's: of its part of the matrix only)."""
        results = judge(self.choice.members, current, self.thresholds, confirmation)
        shard = self.config.pluginmanager.get_plugin("perfgate-shard")
        return [r for r in results if shard is None or r.name not in shard.elsewhere]

    def write_reports(self, changes: list) -> None:
        twin = self.report_path.with_suffix(".json")
        try:  # checked before the run; a disk that filled up since is one line, not a traceback
            self.report_path.parent.mkdir(parents=True, exist_ok=True)
            self.report_path.write_text(summary.markdown(self.results, changes, self.choice.label))
            twin.write_text(json.dumps(summary.as_json(self.results), indent=2))
        except OSError as error:
            self.lines.append(f"perfgate gate: could not write {error.filename or twin}: "
                              f"{error.strerror}; the summary above is all there is")  # fmt: skip
            return
        self.lines.append(f"perfgate gate: summary written to {self.report_path} and {twin}")

    def rerun(self, session: pytest.Session, names: set[str]) -> Rerun:
        """Run the named items again; their results, kept out of the saved run."""
        start = _pytest_benchmark.result_count(self.config)
        run_again(session, names)
        taken = _pytest_benchmark.take_json_since(self.config, start)
        return Rerun(taken, run_from_json(taken, None))

    def profile(self, session: pytest.Session, names: set[str]) -> None:
        folder = self.report_path.parent / "profile"
        line = f"perfgate gate: profiling {len(names)} confirmed regressions into {folder}"
        say(self.config, line)
        profiling.set_profile_dir(folder)
        try:
            self.rerun(session, names)
        finally:
            profiling.set_profile_dir(None)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = list(self.lines)
        if self.problem:
            lines.append(f"perfgate gate could not run: {self.problem} (exit {GATE_NOT_RUN})")
        if lines:
            terminalreporter.section("perfgate gate")
            for line in lines:
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if session.exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR):
            return
        if self.problem:
            session.exitstatus = GATE_NOT_RUN
        elif failed(self.results):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
