"""perfgate.progress: plain lines (or nothing) where stderr is not a terminal, a tqdm bar where it
is; elapsed and remaining on a virtual clock; text from a run never reaches the terminal as
control characters."""

from __future__ import annotations

import io

import pytest

from perfgate.progress import Progress, duration, printable


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_step_is_one_plain_line_with_elapsed_and_remaining():
    clock, stream = Clock(), io.StringIO()
    progress = Progress(4, "A/B blocks", stream, clock=clock)
    clock.now += 30
    progress.step("pair 1 A")
    clock.now += 90
    progress.step("pair 1 B")
    assert stream.getvalue().splitlines() == [
        "A/B blocks 1/4: pair 1 A (30s elapsed, about 1m30s left)",
        "A/B blocks 2/4: pair 1 B (2m00s elapsed, about 2m00s left)",
    ]
    progress.grow(2)
    progress.write("lane 1: 1 undecided")
    assert stream.getvalue().splitlines()[-1] == "lane 1: 1 undecided" and progress.total == 6
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_short_work_off_a_terminal_prints_nothing():
    stream = io.StringIO()
    with Progress(3, "reading runs", stream, lines=False) as progress:
        progress.step("one")
        progress.write("a phase")
    assert stream.getvalue() == ""


def test_on_a_terminal_a_bar_with_elapsed_and_remaining():
    pytest.importorskip("tqdm")
    clock, stream = Clock(), Terminal()
    with Progress(2, "bisect steps", stream, lines=False, clock=clock) as progress:
        progress.step("step 1")
    text = stream.getvalue()
    assert "bisect steps" in text and "1/2" in text and "<" in text  # tqdm: elapsed<remaining
    assert "\r" in text  # a bar redrawn in place, by the library


def test_text_from_a_run_is_printed_as_text():
    stream = io.StringIO()
    Progress(1, "runs", stream).step("case\x1b[31mred\r")
    assert "\x1b" not in stream.getvalue() and "case\\x1b[31mred\\x0d" in stream.getvalue()
    assert printable("a\tb") == "a\\x09b"


@pytest.mark.parametrize("seconds, words", [(0.4, "0s"), (59.6, "1m00s"), (125, "2m05s"),
                                            (3725, "1h02m")])  # fmt: skip
def test_durations_for_people(seconds, words):
    assert duration(seconds) == words
