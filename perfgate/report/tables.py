"""Plain-text and GitHub-markdown tables, and the unit formatting shared by every command."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MISSING = "-"  # a cell with nothing measured


def _three_digits(value: float) -> str:
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def time_unit(seconds: float) -> tuple[str, float]:
    """(unit, seconds per unit) that reads ``seconds`` as a number between 1 and 1000."""
    magnitude = abs(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if magnitude >= scale:
            return unit, scale
    return "ns", 1e-9


def fmt_time(seconds: float | None) -> str:
    """Seconds as '7.30 ms', '2.27 us', '6.43 s'; '-' for None or NaN."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return MISSING
    unit, scale = time_unit(seconds)
    return f"{_three_digits(seconds / scale)} {unit}"


def fmt_bytes(count: float | None) -> str:
    """Bytes in decimal units: '434.0 MB', '16.4 kB' (1 MB = 10^6 bytes)."""
    if count is None:
        return MISSING
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


def fmt_percent(fraction: float | None, signed: bool = False) -> str:
    """A fraction as a percentage: 0.742 -> '74.2 %' ('+74.2 %' when signed)."""
    if fraction is None:
        return MISSING
    return f"{fraction * 100:+.1f} %" if signed else f"{fraction * 100:.1f} %"


def fmt_ratio(ratio: float | None) -> str:
    """A speedup or slowdown factor: '2.59x'."""
    if ratio is None or not math.isfinite(ratio):
        return MISSING
    if ratio < 0.1:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.1f}x"


def fmt_rate(gbps: float | None, unit: str = "GB/s") -> str:
    """A bandwidth given in GB/s, shown in ``unit`` (GB/s or TB/s)."""
    if gbps is None:
        return MISSING
    value = gbps / 1000 if unit == "TB/s" else gbps
    return f"{value:.2f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool) -> str:
    """A table as aligned plain text (columns padded, a dashed rule) or GitHub markdown.

    Columns whose every cell looks numeric are right-aligned in both forms.
    """
    cells = [[str(c) for c in row] for row in rows]
    numeric = [
        bool(cells) and all(_looks_numeric(row[i]) for row in cells) for i in range(len(headers))
    ]
    if markdown:
        rule = ["---:" if right else "---" for right in numeric]
        lines = [headers, rule, *cells]
        return "\n".join("| " + " | ".join(_escape(c) for c in line) + " |" for line in lines)
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(row, widths, numeric, strict=True)
        ]
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


# a number, an optional unit ('x', '%' or a spaced word) and an optional bracketed note
_NUMERIC = re.compile(r"[+-]?[\d.,]+(x|%| [^\s(]+)?( \(.*\))?")


def _looks_numeric(cell: str) -> bool:
    return cell == MISSING or _NUMERIC.fullmatch(cell) is not None


def _escape(cell: str) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")
