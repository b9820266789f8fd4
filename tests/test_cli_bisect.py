"""``perfgate bisect`` on a throwaway git repository: a tiny project whose benchmark waits for
the time written in delay.txt, six commits, one of which doubles the delay.

The benchmark sleeps rather than busy-waits so that it puts no CPU load on the timing tests
that xdist runs beside it. The delay is 100 ms (then 200 ms), and the threshold 25 %, because a
process on a loaded machine resumes late by a scheduler slice or two: a busy-wait version read
its 2 ms rounds as 6 or 10 ms at a load of 7 on 2 cores, and once every round of a 20 ms run
came back 24 ms (+20 %). That lateness must stay well below the threshold and the slowdown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import git, perfgate

from perfgate.ab.bisect_steps import BAD, GOOD, SKIP, _unclear, judge
from perfgate.verdict.outcome import Verdict

BENCHMARK = """\
import time
from pathlib import Path

DELAY = float(Path(__file__).with_name("delay.txt").read_text())


def wait():
    time.sleep(DELAY)


def test_wait(benchmark):
    benchmark.pedantic(wait, rounds=8, iterations=1, warmup_rounds=1)


def test_other(benchmark):
    benchmark.pedantic(wait, rounds=3, iterations=1)
"""
# (subject, files written): GOOD first, BAD last; the slowdown is planted in "wait twice as long"
HISTORY = [
    ("add the wait benchmark", {"bench/test_sleepy.py": BENCHMARK, "bench/delay.txt": "0.100"}),
    ("break the benchmark", {"bench/test_sleepy.py": BENCHMARK.replace("def wait", "def wait(:")}),
    ("fix the benchmark", {"bench/test_sleepy.py": BENCHMARK}),
    ("wait twice as long", {"bench/delay.txt": "0.200"}),
    ("write a readme", {"README": "wait\n"}),
    ("extend the readme", {"README": "wait, longer\n"}),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, list[str]]:
    """The repository and its commits, oldest first."""
    repo = tmp_path_factory.mktemp("project")
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for subject, files in HISTORY:
        for name, text in files.items():
            (repo / name).parent.mkdir(exist_ok=True)
            (repo / name).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    return repo, commits


def state(repo: Path) -> tuple[str, str, str, str]:
    """What must be the same before and after a bisection."""
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain"),
        git(repo, "worktree", "list", "--porcelain"),
        git(repo, "for-each-ref", "refs/bisect"),
    )


def bisect(repo: Path, monkeypatch, tmp_path, *arguments: str) -> tuple[int, str, str]:
    monkeypatch.chdir(repo)
    threshold = [] if "--threshold" in arguments else ["--threshold", "25%"]
    return perfgate("bisect", *arguments, "--tests", "bench", "--out", str(tmp_path / "results"),
                    *threshold)  # fmt: skip


@pytest.mark.slow
def test_bisect_names_the_planted_commit_and_leaves_the_repository_as_it_was(
    project, monkeypatch, tmp_path
):
    repo, commits = project
    before = state(repo)
    status, out, err = bisect(
        repo, monkeypatch, tmp_path, commits[0], commits[-1], "-k", "test_wait"
    )
    assert status == 0, out + err
    assert f"first bad commit: {commits[3]}" in out
    assert "wait twice as long" in out
    change = re.search(r"measured there vs GOOD: test_wait ([+-]\d+\.\d) %", out)
    # planted: 100 ms -> 200 ms; a late wake-up moves it a little either way
    assert change and float(change.group(1)) > 50, out
    table = out[: out.index("first bad commit")]
    assert re.search(rf"^{commits[-1][:10]} .* bad ", table, re.M)  # BAD, measured first
    assert "test_other" not in table  # -k chose the case
    assert state(repo) == before
    log = next((tmp_path / "results").rglob("steps.jsonl")).read_text()
    assert log.count("\n") >= 4  # GOOD, BAD (two lines: confirmed) and at least one step
    assert "vs GOOD measured again now" in log  # each bad step confirmed against GOOD, A/B


def test_a_commit_where_the_case_does_not_run_is_skipped(project, monkeypatch, tmp_path):
    repo, commits = project
    status, out, err = bisect(
        repo, monkeypatch, tmp_path, commits[0], commits[2], "-k", "test_wait"
    )
    # GOOD to "fix the benchmark": same speed, so nothing to bisect, and the broken commit
    # between them was never needed
    assert status == 1, out + err
    assert "is not slower than GOOD" in out
    assert re.search(rf"^{commits[2][:10]} .* good ", out, re.M)
    from perfgate.ab.bisect_steps import SKIP, step_main

    git(repo, "checkout", "-q", commits[1])
    try:
        files = ["--good-json", str(tmp_path / "g.json"), "--log", str(tmp_path / "log"),
                 "--good-checkout", str(repo)]  # fmt: skip
        args = [
            *files,
            "--tests",
            "bench",
            "-k",
            "test_wait",
            "--threshold",
            "0.1",
            "--alpha",
            "0.01",
        ]
        assert step_main(args, repo) == SKIP
        assert "pytest exited 2" in (tmp_path / "log").read_text()
    finally:
        git(repo, "checkout", "-q", "main")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["nonsense", "HEAD", "-k", "test_wait"], "'nonsense' is not a commit"),
        (["HEAD", "HEAD~5", "-k", "test_wait"], "is not an ancestor of BAD"),
        (["HEAD", "HEAD", "-k", "test_wait"], "the same commit"),
        (["HEAD~5", "HEAD", "-k", "no_such_case"], "the case did not run at GOOD"),
    ],
)
def test_errors_are_one_line_with_status_2_and_change_nothing(
    project, monkeypatch, tmp_path, arguments, message
):
    repo, _ = project
    before = state(repo)
    status, _, err = bisect(repo, monkeypatch, tmp_path, *arguments)
    assert status == 2 and message in err
    assert err.strip().splitlines()[-1].startswith("perfgate bisect: error:")
    assert state(repo) == before


def test_outside_a_git_repository(tmp_path, monkeypatch):
    status, _, err = bisect(tmp_path, monkeypatch, tmp_path, "A", "B", "-k", "x")
    assert status == 2 and "not a git repository" in err


def test_ctrl_c_leaves_the_repository_as_it_was(project, monkeypatch, tmp_path):
    repo, commits = project
    before = state(repo)

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr("perfgate.ab.bisect.step_main", interrupted)
    status, _, err = bisect(repo, monkeypatch, tmp_path, commits[0], commits[-1], "-k", "x")
    assert status == 130 and "left as it was" in err
    assert state(repo) == before


def test_a_threshold_past_100_percent_reaches_each_step_as_written(project, monkeypatch, tmp_path):
    """150 % is a threshold (a case 2.5 times slower); bisect hands it to its steps as written,
    and the step's parser, the same declaration, reads it the same way."""
    from perfgate.ab import bisect_steps

    repo, commits = project
    steps = []

    def measured_good(argv, cwd=None):  # GOOD and BAD both measure: BAD is not slower
        steps.append(argv)
        return bisect_steps.GOOD

    monkeypatch.setattr("perfgate.ab.bisect.step_main", measured_good)
    status, out, err = bisect(repo, monkeypatch, tmp_path, commits[0], commits[-1], "-k", "x",
                              "--threshold", "150%")  # fmt: skip
    assert status == 1 and "nothing to bisect" in out, err
    for argv in steps:
        given = bisect_steps._parser().parse_args(argv[: argv.index("--")])
        assert (given.threshold, given.threshold.text, given.tests) == (1.5, "150%", ["bench"])


def write_run(path: Path, rounds: list[float]) -> Path:
    stats = {"median": sorted(rounds)[len(rounds) // 2], "data": rounds}
    benchmark = {"name": "test_wait", "fullname": "bench/test_sleepy.py::test_wait", "stats": stats}
    path.write_text(json.dumps({"benchmarks": [benchmark]}))
    return path


@pytest.mark.parametrize(
    "current, verdict, unclear",
    [
        ([0.040, 0.041, 0.039, 0.040, 0.042, 0.040], BAD, False),  # 2x, 6 rounds: significant
        # 2x in 3 rounds: no test can reach p < 0.01 (3 vs 6 rounds: 1/84 at best), but every
        # round is slower than every GOOD round by more than the threshold
        ([0.040, 0.041, 0.039], BAD, False),
        ([0.020, 0.041, 0.039], SKIP, True),  # 3 rounds that overlap GOOD's: cannot decide
        ([0.020, 0.0205, 0.0201], GOOD, False),  # within 10 % of every GOOD round
        ([0.020, 0.021, 0.019, 0.020, 0.022, 0.020], GOOD, False),
    ],
)
def test_judge_decides_by_the_gates_time_rule(tmp_path, current, verdict, unclear):
    good = write_run(tmp_path / "good.json", [0.020, 0.021, 0.019, 0.020, 0.022, 0.020])
    now = write_run(tmp_path / "now.json", current)
    found, cases = judge(good, now, threshold=0.10, alpha=0.01)
    assert found == verdict
    assert cases[0].name == "test_wait"
    assert _unclear(cases) == unclear
    if unclear:
        assert cases[0].verdict is Verdict.UNDECIDED
        assert cases[0].message.startswith("undecided: too few rounds to decide (6 baseline")
