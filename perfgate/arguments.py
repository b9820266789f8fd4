"""The options the plugin and the command line share, declared once: each ``add_*`` takes pytest's
``addoption`` (``perfgate.options``) or argparse's ``add_argument`` (``perfgate.cli``), as
pytest-benchmark declares its own options for its plugin and its command alike. The ``type=``
checks a value at the door (pytest or the command stops with its usage line before any work), and
a threshold keeps the text the user wrote (``verdict.thresholds.ThresholdSpec``), to pass on to a
child process as it was. Imports nothing of perfgate until a value is given.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

AddOption = Callable[..., object]  # pytest's group.addoption or argparse's add_argument


def _parsed_by(name: str) -> Callable[[str], object]:
    """The argparse type ``verdict.thresholds.<name>``, imported when a value is given."""

    def parse(text: str) -> object:
        from perfgate.verdict import thresholds

        return getattr(thresholds, name)(text)

    return parse


_threshold = _parsed_by("threshold_argument")  # a ThresholdSpec
_fraction = _parsed_by("fraction_argument")  # a Fraction
_alpha = _parsed_by("alpha_argument")


def add_thresholds(addoption: AddOption, flag: str, default: str) -> None:
    """``flag [NAME=]FRACTION``, repeatable: the slowdown that counts (``ThresholdSpec``)."""
    addoption(
        flag,
        action="append",
        default=[],
        type=_threshold,
        metavar="[NAME=]FRACTION",
        help="slowdown that counts: 0.15 or 15%% for every case, NAME=20%% for a family or "
        "a test function (any case; repeatable; a bare 15 is refused); default: " + default,
    )


def add_fraction(
    addoption: AddOption,
    flag: str,
    default: float | None,
    what: str,
    default_text: str = "%(default)s",
) -> None:
    """``flag FRACTION``: one fraction (``Fraction``: 0.1 or 10%, as a threshold is written)."""
    addoption(
        flag,
        type=_fraction,
        default=default,
        metavar="FRACTION",
        help=f"{what}, 0.1 or 10%% as a threshold is written (default: {default_text})",
    )


def add_alpha(addoption: AddOption, default: float) -> None:
    """``--alpha A``: the one-sided Mann-Whitney significance level, above 0 and below 1."""
    addoption(
        "--alpha",
        type=_alpha,
        default=default,
        metavar="A",
        help="one-sided Mann-Whitney significance level (default: %(default)s)",
    )


def add_baselines(addoption: AddOption, flag: str) -> None:
    """``flag DIR``: the root of per-hardware baseline folders."""
    addoption(
        flag,
        default=None,
        metavar="DIR",
        help="root of per-hardware baseline folders, DIR/<hardware key>/ (default: the "
        "project's ini setting perfgate_baselines, else pytest-benchmark's "
        "storage)",
    )


def add_test_paths(addoption: AddOption) -> None:
    """``--tests PATH ...``: the test paths a child pytest runs (default: the project's)."""
    addoption(
        "--tests",
        nargs="+",
        metavar="PATH",
        help="test paths to run (default: the project's, its pytest testpaths)",
    )


def add_count(
    addoption: AddOption, flag: str, default: int | None, least: int, what: str, metavar: str = "N"
) -> None:
    """``flag N``: a whole number of at least ``least``."""
    shown = "all" if default is None else default
    addoption(
        flag,
        type=at_least(least),
        default=default,
        metavar=metavar,
        help=f"{what} (default: {shown})",
    )


def at_least(least: int) -> Callable[[str], int]:
    """An argparse type for a whole number of at least ``least``."""

    def count(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = least - 1
        if number < least:
            raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, {least} or more")
        return number

    return count


def variable_name(text: str) -> str:
    """An environment variable's name (``--perf-callgrind-env NAME``), checked at the door."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: an environment variable's name, e.g. MY_FLAG")
    return text
