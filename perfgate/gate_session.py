"""``--perf-gate`` inside a pytest session: gate after the run, re-run what looks slower,
profile what is confirmed, report, and set the exit status."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from perfgate import timing
from perfgate.baselines import baseline_set, load_run
from perfgate.counters import is_instructions
from perfgate.gate import Thresholds, Verdict
from perfgate.gate_report import environment_difference, markdown, terminal_lines
from perfgate.run_gate import (
    GateInputs,
    measured_from_run,
    measured_from_session,
    rerun_names,
    run_gate,
)
from perfgate.runs import environment


def add_options(group) -> None:
    group.addoption(
        "--perf-gate",
        action="store_true",
        help="gate on this hardware's newest baseline (implies --benchmark-compare): fail only "
        "on confirmed, significant regressions",
    )
    group.addoption(
        "--perf-gate-threshold",
        action="append",
        default=[],
        metavar="[FAMILY=]FRACTION",
        help="slowdown that counts, as a fraction: 0.15 for every test, sdpa=0.2 for one family "
        "(repeatable; default 0.10). A test's @pytest.mark.perfgate(threshold=...) wins",
    )
    group.addoption(
        "--perf-gate-report",
        default="perfgate-results/gate.md",
        help="markdown summary of the gate (default: perfgate-results/gate.md)",
    )


def parse_thresholds(specs: list[str]) -> Thresholds:
    default, families = None, {}
    for spec in specs:
        family, _, value = spec.rpartition("=")
        try:
            fraction = float(value)
        except ValueError:
            raise pytest.UsageError(
                f"--perf-gate-threshold {spec!r}: expected FRACTION or FAMILY=FRACTION, e.g. 0.15"
            ) from None
        if family:
            families[family] = fraction
        else:
            default = fraction
    try:
        return Thresholds(default=0.10 if default is None else default, families=families)
    except ValueError as error:
        raise pytest.UsageError(f"--perf-gate-threshold: {error}") from None


def untrusted_reason(*machine_infos: dict) -> str | None:
    reasons = []
    for side, info in zip(("baseline", "current run"), machine_infos, strict=True):
        health = info.get("perfgate", {}).get("gpu_health", {})
        reasons += [f"{side}: {r}" for r in health.get("untrusted_reasons", [])]
    return "; ".join(reasons) or None


def describe_baseline(members: list[Path]) -> str:
    """The newest run's path, and the set it belongs to when there is one."""
    if len(members) == 1:
        return str(members[0])
    earlier = ", ".join(p.name for p in members[:-1])
    return (
        f"{members[-1]} (a set with {earlier}: each benchmark is compared with its slowest run "
        "in the set, each ratio with its worst)"
    )


class GateSession:
    """The gate's state for one pytest session; registered as a plugin when --perf-gate is on."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.thresholds = parse_thresholds(config.getoption("--perf-gate-threshold"))
        self.report_path = Path(config.getoption("--perf-gate-report"))
        self.families: dict[str, tuple[str | None, float | None]] = {}
        self.lines: list[str] = []
        self.failed = False

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("perfgate")
            if marker is not None:
                self.families[item.nodeid] = (
                    marker.kwargs.get("family"),
                    marker.kwargs.get("threshold"),
                )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        if not session.shouldfail and not session.shouldstop:
            self.gate(session)
        return result

    def gate(self, session: pytest.Session) -> None:
        benchmarks = self.config._benchmarksession  # pytest-benchmark's session object
        if benchmarks.disabled:
            self.lines = [
                "perfgate gate: benchmarks are disabled here (xdist or --benchmark-disable)"
            ]
            return
        if not benchmarks.compared_mapping:
            self.lines = ["perfgate gate: no baseline to compare with, nothing gated"]
            return
        path = Path(next(iter(benchmarks.compared_mapping)))
        if not path.is_absolute():  # pytest-benchmark keys runs by their path in the storage
            path = Path(str(benchmarks.storage.path)) / path
        load = functools.cache(load_run)  # each baseline file is read once
        baseline_run = load(path)
        members = baseline_set(path, lambda run: environment(run.get("machine_info", {})), load)
        baselines = [measured_from_run(load(p)["benchmarks"]) for p in members]
        current = measured_from_session(benchmarks.benchmarks)
        current_info = benchmarks.get_machine_info()
        inputs = GateInputs(
            self.families,
            self.thresholds,
            untrusted_reason(baseline_run.get("machine_info", {}), current_info),
        )
        results = run_gate(baselines, current, inputs)
        flagged = {r.name for r in results if r.verdict is Verdict.UNCONFIRMED}
        if flagged:
            names = rerun_names(results, current)
            self._say(f"perfgate gate: re-running {len(names)} benchmarks to confirm")
            confirmation = measured_from_session(self.rerun(session, names))
            results = run_gate(baselines, current, inputs, confirmation)
        regressed = {r.name for r in results if r.verdict is Verdict.REGRESSION}
        # counted cases carry their function diff already; a timed profile would re-count them
        timed = {name for name in regressed if not is_instructions(current[name].extra_info)}
        if timed:
            self.profile(session, timed)
        changes = environment_difference(baseline_run.get("machine_info", {}), current_info)
        label = describe_baseline(members)
        self.lines = terminal_lines(results, changes, label)
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(markdown(results, changes, label))
        self.lines.append(f"perfgate gate: summary written to {self.report_path}")
        self.failed = bool(regressed)

    def rerun(self, session: pytest.Session, names: set[str]) -> list:
        """Run the named items again; return their new results and keep them out of the saved
        run, which holds one entry per benchmark (the first)."""
        benchmarks = self.config._benchmarksession.benchmarks
        before = len(benchmarks)
        items = [item for item in session.items if item.nodeid in names]
        for index, item in enumerate(items):
            following = items[index + 1] if index + 1 < len(items) else None
            item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
        again = benchmarks[before:]
        del benchmarks[before:]
        return again

    def profile(self, session: pytest.Session, names: set[str]) -> None:
        folder = self.report_path.parent / "profile"
        self._say(f"perfgate gate: profiling {len(names)} confirmed regressions into {folder}")
        timing.set_profile_dir(folder)
        try:
            self.rerun(session, names)
        finally:
            timing.set_profile_dir(None)

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, bold=True)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.lines:
            terminalreporter.section("perfgate gate")
            for line in self.lines:
                terminalreporter.write_line(line)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
