"""The files a pytest session writes at its end, checked in ``pytest_configure``: a report
written after a six-minute GPU run must not fail on a path that was wrong from the start."""

from __future__ import annotations

import pytest

from perfgate.options import Options
from perfgate.outputs import BadOutput, check_file, check_folder, gate_twin


def check_session_outputs(config: pytest.Config, read: Options) -> None:
    """Every file the session writes at its end, checked now, before the first benchmark; a
    usage error (one line naming the option) for one that cannot be written."""
    files = {"--benchmark-json": config.option.benchmark_json}
    report = read.report
    if read.gate:
        files.update({"--perf-gate-report": report, "--perf-gate-report's twin": gate_twin(report)})
    try:
        if read.gate and gate_twin(report) == report:
            raise BadOutput(
                f"--perf-gate-report {report}: the markdown summary and its JSON twin would be "
                f"one file; name the markdown file (e.g. {report.with_suffix('.md')})"
            )
        for option, path in files.items():
            # pytest-benchmark before 5.3 opens --benchmark-json itself: an open file is writable
            if path is not None and not hasattr(path, "write"):
                # pytest-benchmark does not create --benchmark-json's folder
                check_file(path, option, create_folder=option == "--benchmark-json")
        if read.profile is not None:
            check_folder(read.profile, "--perf-profile")
    except BadOutput as error:
        raise pytest.UsageError(str(error)) from error
