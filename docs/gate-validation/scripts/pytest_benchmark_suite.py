"""Run pytest-benchmark's own test suite (from the sdist of the version installed here) and keep
the ids of the tests that passed; with --compare-with, fail when a test that passed in that
other run does not pass in this one. ``tox -e pytest-benchmark-suite`` runs it alone, then with
perfgate installed: perfgate must change nothing pytest-benchmark's suite can see.

    python docs/gate-validation/scripts/pytest_benchmark_suite.py OUT.json \
        [--compare-with ALONE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from importlib.metadata import version
from pathlib import Path


def download_sdist(folder: Path) -> Path:
    """pytest-benchmark's sdist, of the installed version, unpacked in ``folder``."""
    wanted = f"pytest-benchmark=={version('pytest-benchmark')}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
         "--dest", str(folder), wanted],
        check=True,
    )  # fmt: skip
    [archive] = folder.glob("pytest_benchmark-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return next(p for p in folder.iterdir() if p.is_dir())


def passed_tests(source: Path, report: Path) -> tuple[set[str], dict[str, int]]:
    """Run the suite as its tox does (nocov), in ``source``; the passed ids and the counts."""
    environment = {**os.environ, "PYTHONPATH": str(source / "tests"), "COLUMNS": "80"}
    command = [sys.executable, "-m", "pytest", "--ignore=src", "-p", "no:cacheprovider",
               "-q", f"--junitxml={report}"]  # fmt: skip
    subprocess.run(command, cwd=source, env=environment, check=False)
    passed, counts = set(), {"passed": 0, "failed": 0, "skipped": 0}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        outcome = "failed" if tags & {"failure", "error"} else "passed"
        outcome = "skipped" if "skipped" in tags else outcome
        counts[outcome] += 1
        if outcome == "passed":
            passed.add(name)
    return passed, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the passed tests (JSON)")
    parser.add_argument("--compare-with", type=Path, help="a run without perfgate (JSON)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        source = download_sdist(Path(temporary))
        passed, counts = passed_tests(source, Path(temporary) / "junit.xml")
    args.out.write_text(json.dumps({"counts": counts, "passed": sorted(passed)}, indent=1))
    print(f"pytest-benchmark {version('pytest-benchmark')}'s suite: {counts}")
    if args.compare_with is None:
        return 0
    alone = set(json.loads(args.compare_with.read_text())["passed"])
    lost = sorted(alone - passed)
    for name in lost:
        print(f"passes without perfgate, not with it: {name}")
    print(f"{len(alone & passed)} of {len(alone)} tests that pass alone pass with perfgate")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
