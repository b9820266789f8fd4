"""Parameters JSON cannot hold, and text with terminal control characters (extras.sh)."""

import enum

import pytest
from cattrs import Converter


class Strategy(enum.Enum):
    AS_DICT = "asdict"


class Opaque:
    def __repr__(self) -> str:
        return "Opaque\x1b[2J\x1b[31m<red>"


@pytest.mark.parametrize(
    "value",
    [Strategy.AS_DICT, Converter, float("nan"), b"\xff\x00", Opaque(), "\x1b[2Jclear"],
    ids=["enum", "class", "nan", "bytes", "object", "esc-id"],
)
def test_odd(benchmark, value):
    c = Converter()
    benchmark(c.unstructure, 5)
