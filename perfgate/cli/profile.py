"""``perfgate profile``: one benchmark case under torch.profiler, through the plugin's
``--perf-profile DIR`` option, which writes DIR/<name>.txt (top operators) and
DIR/<name>.trace.json (Chrome trace) for each case it runs; for a plain benchmark call that ran
no PyTorch operator, cProfile's table and DIR/<name>.prof (``measure.plain_profile``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from perfgate.ab import children
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError

DEFAULT_FOLDER = Path("perfgate-results/profile")
TRACE_SUFFIX = ".trace.json"
PSTATS_SUFFIX = ".prof"  # cProfile's, for a plain call that ran no PyTorch operator
PYTEST_USAGE_ERROR = 4  # pytest's exit code for bad arguments, e.g. an unknown option
PYTEST_NO_TESTS = 5  # pytest's exit code when nothing was collected
NOTHING_PROFILED = 2  # the command's error status: pytest passed, but no case was profiled
LIST_IDS = "list the ids with `pytest --collect-only -q`"


def profile_argv(test_id: str, folder: Path, extra: Sequence[str] = ()) -> list[str]:
    """The pytest command line that profiles ``test_id`` into ``folder``."""
    return children.pytest(
        test_id,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--perf-profile",
        str(folder),
        *extra,
    )


def _files(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


def _no_profile_hint(returncode: int, folder: Path) -> str:
    if returncode == PYTEST_NO_TESTS:
        return f"no test matched TEST_ID; {LIST_IDS}"
    if returncode == PYTEST_USAGE_ERROR:
        return (
            "pytest found no test TEST_ID names, or rejected the arguments after -- (see its "
            f"output above); {LIST_IDS}"
        )
    if returncode == 0:
        return (
            "the case ran, but made no benchmark call to profile (a case timed in rounds by "
            "perfgate.measure.timing.time_rounds is never profiled)"
        )
    return f"nothing was written to {folder}; see the pytest output above"


def _id_problem(test_id: str) -> str | None:
    """Why ``test_id`` cannot name a test (checked before pytest starts), or None."""
    if "::" not in test_id and not Path(test_id).exists():
        return "not a pytest id (FILE::TEST[PARAMETERS])"
    if not Path(test_id.partition("::")[0]).exists():
        return f"there is no file {test_id.partition('::')[0]}"
    return None


def run_profile(
    test_id: str, folder: Path = DEFAULT_FOLDER, extra: Sequence[str] = (), out=None, err=None
) -> int:
    """Run pytest on ``test_id`` with --perf-profile, stream its output, then print each
    operator table written and the trace paths. Returns pytest's exit status; CommandError
    (pytest's status, else 2) when nothing was profiled."""
    out = out or sys.stdout
    err = err or sys.stderr
    folder = Path(folder)
    if problem := _id_problem(test_id):
        raise CommandError(f"TEST_ID {test_id!r}: {problem}; {LIST_IDS}")
    folder.mkdir(parents=True, exist_ok=True)
    before = _files(folder)
    command = profile_argv(test_id, folder, extra)
    print(f"running: {shlex.join(command)}", file=err, flush=True)
    returncode = children.stream(command, out)
    written = sorted(p for p, stamp in _files(folder).items() if before.get(p) != stamp)
    tables = [p for p in written if p.suffix == ".txt"]
    traces = [p for p in written if p.name.endswith(TRACE_SUFFIX) or p.suffix == PSTATS_SUFFIX]
    for table in tables:
        print(f"\n=== {table}", file=out)
        print(table.read_text(encoding="utf-8").rstrip(), file=out)
    for trace in traces:
        opened = (
            "python -m pstats, or snakeviz"
            if trace.suffix == PSTATS_SUFFIX
            else "https://ui.perfetto.dev or chrome://tracing"
        )
        kind = "pstats" if trace.suffix == PSTATS_SUFFIX else "Chrome trace"
        print(f"{kind}: {trace} (open in {opened})", file=out)
    if not tables and not traces:
        hint = _no_profile_hint(returncode, folder)
        raise CommandError(f"no profile written: {hint}", returncode or NOTHING_PROFILED)
    return returncode


class Profile(Command):
    name = "profile"
    summary = "one benchmark case under torch.profiler"
    usage = "perfgate profile [-h] [--out DIR] TEST_ID [-- PYTEST_ARG ...]"
    takes_pytest_args = True
    examples = """\
  perfgate profile 'tests/test_attention.py::test_attention[cpu-fp32]'
  perfgate profile 'tests/test_attention.py::test_attention[cuda-fp16]' \\
      --out prof/ -- -p no:randomly    # arguments after -- go to pytest"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("test_id", metavar="TEST_ID", help="a pytest id of one benchmark case")
        cls.add_out(parser, DEFAULT_FOLDER, "folder for the tables and traces")

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run_profile(args.test_id, args.out, args.pytest_args, out, err)
