"""bisect's GOOD / BAD / SKIP as a pure function of the judge's verdicts (``verdict.bisect``), its
log's lines as typed rows, and the one reader of every file of rows (``verdict.rows.read``):
a format this perfgate does not know is refused in one line."""

from __future__ import annotations

import json

import pytest

from perfgate.verdict.bisect import Said, Step, StepRow, step_of, step_row, unclear
from perfgate.verdict.outcome import GateResult, Verdict
from perfgate.verdict.reason import Reason
from perfgate.verdict.rows import AB, GATE, GateRow, Kind, RowsError, read, rows_of, written

V = Verdict


@pytest.mark.parametrize(
    "verdicts, step",
    [
        ([V.REGRESSION], Step.BAD),
        ([V.UNCONFIRMED], Step.BAD),  # bisect measures GOOD again itself
        ([V.UNCONFIRMED, V.NOT_GATED], Step.BAD),  # one slower case is enough
        ([V.NOT_GATED], Step.SKIP),
        ([V.UNCHANGED, V.NOT_GATED], Step.SKIP),  # one case that cannot decide
        ([], Step.SKIP),  # no case in common with GOOD
        ([V.UNCHANGED], Step.GOOD),
        ([V.IMPROVEMENT, V.UNCHANGED], Step.GOOD),
    ],
)
def test_a_step_is_decided_by_the_verdicts_alone(verdicts, step):
    assert step_of(verdicts) is step
    assert step_of(iter(verdicts)) is step  # any iterable, read once
    assert unclear(verdicts) == (V.NOT_GATED in verdicts)


def test_the_steps_are_git_bisect_runs_exit_statuses():
    assert (Step.GOOD, Step.BAD, Step.SKIP) == (0, 1, 125)
    assert [Said.of(step) for step in Step] == [Said.GOOD, Said.BAD, Said.SKIP]


def case(verdict: Verdict = V.REGRESSION) -> GateRow:
    reason = Reason.TOO_NOISY if verdict is V.NOT_GATED else None
    return GateRow.of(GateResult("test_wait", verdict, "slower", reason=reason, threshold=0.1))


def test_a_logged_step_reads_back_as_it_was_written():
    row = StepRow("abc123", "make it slow", Said.BAD_AT_FIRST, "vs GOOD at start", [case()])
    line = json.loads(json.dumps(row.as_json()))
    assert line["format"] == 1 and line["said"] == "bad?"
    assert step_row(line) == row
    assert step_row(StepRow("abc", "s", Said.REFERENCE).as_json()).cases == []


@pytest.mark.parametrize(
    "change, said",
    [
        ({"format": 2}, "newer than this perfgate reads (1): upgrade perfgate"),
        ({"format": None}, "unknown format None; this perfgate reads 1 to 1"),
        ({"format": "1"}, "unknown format '1'"),
        ({"format": True}, "unknown format True"),
        ({"rows": None}, "not a perfgate bisect step log"),
        ({"said": "maybe"}, "'maybe' is no step's answer"),
        ({"subject": 3}, "commit, subject and reason must be text"),
        ({"rows": [{"name": "x", "verdict": "worse"}]}, "row 0 (x): 'worse' is not a valid"),
    ],
)
def test_a_log_line_this_perfgate_cannot_read_is_refused_in_one_line(change, said):
    line = {**StepRow("abc", "s", Said.GOOD, cases=[case(V.UNCHANGED)]).as_json(), **change}
    with pytest.raises(RowsError) as error:
        step_row(line)
    assert said in str(error.value) and "\n" not in str(error.value)


def test_every_file_of_rows_is_read_through_one_reader_that_checks_its_kind_and_format():
    rows = [case(V.UNCHANGED).as_json(), case(V.NOT_GATED).as_json()]
    head, found = rows_of(AB, written(AB, rows, base_commit="abc", lanes=2))
    assert head == {"base_commit": "abc", "lanes": 2}
    assert [row.verdict for row in found] == [V.UNCHANGED, V.NOT_GATED]
    assert found[1].reason is Reason.TOO_NOISY
    later = Kind("nightly verdicts", 2, oldest=1)  # a kind that reads an older format too
    assert read(later, {"format": 1, "rows": []}) == {"format": 1, "rows": []}
    with pytest.raises(RowsError, match="of an unknown format 0; this perfgate reads 1 to 2"):
        read(later, {"format": 0, "rows": []})
    with pytest.raises(RowsError, match="^A/B result of format 3, newer .*: upgrade perfgate$"):
        rows_of(AB, {"format": 3, "rows": []})
    with pytest.raises(RowsError, match="^not a perfgate gate summary"):
        read(GATE, [])


def test_a_row_keeps_the_p_value_and_the_block_pairs_it_was_judged_on():
    from perfgate.stats import Comparison

    pairs = Comparison(1.0, 1.2, 1.2, 20.0, 0.004, 1.0, 1.1, 1.3, 3, 3, paired=True)
    row = GateRow.of(GateResult("a", V.REGRESSION, "slower", comparison=pairs))
    assert (row.p_value, row.pairs, row.change_percent) == (0.004, 3, 20.0)
    rounds = Comparison(1.0, 1.2, 1.2, 20.0, 0.004, 1.0, 1.1, 1.3, 9, 9)
    assert GateRow.of(GateResult("a", V.REGRESSION, "slower", comparison=rounds)).pairs is None
    (back,) = rows_of(AB, written(AB, [row.as_json()]))[1]
    assert back == row
    with pytest.raises(RowsError, match="pairs must be a count"):
        rows_of(AB, written(AB, [{**row.as_json(), "pairs": 2.5}]))
