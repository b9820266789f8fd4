"""Plain-text and GitHub-markdown tables (the units they show are ``perfgate.format``'s)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from perfgate import format as fmt
from perfgate.format import MISSING


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool) -> str:
    """A table as aligned plain text (columns padded, a dashed rule) or GitHub markdown.

    Columns whose every cell looks numeric are right-aligned in both forms. Every cell is
    escaped for its target (``perfgate.format``): a stored name is never markup or control.
    """
    escape = fmt.markdown if markdown else fmt.terminal
    headers = [escape(h) for h in headers]
    cells = [[escape(c) for c in row] for row in rows]
    numeric = [
        bool(cells) and all(_looks_numeric(row[i]) for row in cells) for i in range(len(headers))
    ]
    if markdown:
        rule = ["---:" if right else "---" for right in numeric]
        lines = [headers, rule, *cells]
        return "\n".join("| " + " | ".join(line) + " |" for line in lines)
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
