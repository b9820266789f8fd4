"""The gate's summary (terminal lines, markdown for CI job pages, JSON): every benchmark is listed
as gated or not gated with its reason, and every word comes from the verdict."""

from __future__ import annotations

import pytest
from helpers import entry, rounds, run_of

from perfgate.verdict import judge, summary


@pytest.fixture(scope="module")
def judged():
    baseline = run_of(
        entry("x::slower", rounds(1)), entry("x::gone", rounds(1)),
        entry("x::host", rounds(1), extra={"host_bound": True}), entry("x::a|b", rounds(1)),
    )  # fmt: skip
    current = run_of(
        entry("x::slower", rounds(2, 2.0)), entry("x::new", rounds(1)),
        entry("x::host", rounds(2)), entry("x::a|b", rounds(3)), software={"torch": "2.14.0"},
    )  # fmt: skip
    results = judge([baseline], current)
    return results, summary.environment_difference(baseline, current)


def test_counts_of_an_empty_or_all_unchanged_result():
    assert summary.counts([]) == "0 gated"
    same = judge([run_of(entry("x::t", rounds(1)))], run_of(entry("x::t", rounds(2))))
    assert summary.counts(same) == "1 gated (1 unchanged)"


def test_counts_name_the_reason_of_every_undecided_and_not_gated_case():
    baseline = run_of(entry("x::two", rounds(1, n=2)), entry("x::four", rounds(1, n=4)),
                      entry("x::host", rounds(1), extra={"host_bound": True}))  # fmt: skip
    current = run_of(entry("x::two", rounds(2, 2.0, n=2)), entry("x::four", rounds(2, 2.0, n=4)),
                     entry("x::host", rounds(2)))  # fmt: skip
    assert summary.counts(judge([baseline], current)) == (
        "1 gated (1 unconfirmed); 1 undecided (1 too few rounds to decide); 1 not gated "
        "(1 host-bound)"
    )


def test_terminal_lines_list_each_kind_with_its_reason(judged):
    results, changes = judged
    lines = summary.terminal_lines(results, changes, "BASE")
    assert lines[0] == (
        "perfgate gate against BASE: 2 gated (1 unconfirmed, 1 unchanged); 1 not gated "
        "(1 host-bound); 1 new; 1 not run"
    )
    assert lines[1] == "  environment: torch 2.13.0 -> 2.14.0"
    heading = lines.index("Not gated, with the reason:")
    assert lines[heading + 1].startswith("  x::host | ") and "host-bound" in lines[heading + 1]
    new = lines.index("New benchmarks (not in the baseline):")
    assert lines[new + 1] == "  x::new |  |  |  |  | new benchmark: not in the baseline | "
    assert lines[-1] == "1 baseline benchmarks were not run this time (deselected or skipped)"
    assert not any(line.startswith("  x::a|b") for line in lines)  # unchanged: counted only


def test_markdown_has_a_table_per_verdict_and_escapes_pipes(judged):
    results, changes = judged
    text = summary.markdown(results, changes, "BASE")
    assert (
        "Result: 2 gated (1 unconfirmed, 1 unchanged); 1 not gated (1 host-bound); 1 new; "
        "1 not run." in text
    )
    assert "| torch | 2.13.0 | 2.14.0 |" in text
    for heading in ("## Unconfirmed", "## Not gated, with the reason", "## New benchmarks"):
        assert heading in text
    assert "<summary>1 unchanged</summary>" in text and "| x::a\\|b | " in text
    assert "<summary>1 baseline benchmarks not run</summary>" in text and "- x::gone" in text


def test_json_rows_say_gated_or_not_and_carry_the_comparison(judged):
    results, _ = judged
    rows = {row["name"]: row for row in summary.as_json(results)["rows"]}
    assert {name: row["gated"] for name, row in rows.items()} == {
        "x::slower": True, "x::a|b": True, "x::host": False, "x::new": False, "x::gone": False,
    }  # fmt: skip
    slower = next(r for r in results if r.name == "x::slower")
    assert rows["x::slower"]["change_percent"] == slower.comparison.change_percent
    assert rows["x::slower"]["message"] == slower.message
    assert rows["x::new"]["baseline_median_s"] is None and rows["x::new"]["verdict"] == "new"


def test_a_summary_past_a_job_pages_limit_is_cut_and_says_where_the_rest_is(monkeypatch):
    names = [f"x::case_{i:04d}" for i in range(300)]
    baseline = run_of(*[entry(name, rounds(i)) for i, name in enumerate(names)])
    current = run_of(*[entry(name, rounds(i + 1000, 1.3 if i < 40 else 1.0))
                       for i, name in enumerate(names)])  # fmt: skip
    results = judge([baseline], current)
    whole = summary.markdown(results, [], "BASE", "perfgate-results/gate.json")
    monkeypatch.setattr(summary, "MARKDOWN_BYTES", len(whole.encode()) // 2)
    cut = summary.markdown(results, [], "BASE", "perfgate-results/gate.json")
    assert len(cut.encode()) <= summary.MARKDOWN_BYTES < len(whole.encode())
    assert cut.splitlines()[-1].startswith("**Cut here**: this summary is ")
    assert "every verdict is in perfgate-results/gate.json." in cut
    assert cut.count("<details>") == cut.count("</details>")
    assert sum(line.startswith("```") for line in cut.splitlines()) % 2 == 0
    assert cut.startswith(whole[: len(cut) // 2])  # the regressions first, as they were
