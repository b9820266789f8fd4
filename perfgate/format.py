"""One way to print a number and one way to escape a stored string, for every stage.

The ground floor: it imports nothing of perfgate. Times, bytes, percentages and ratios are
formatted here once (the gate, ``compare``, ``history``, the report and the dashboard print the
same ``43.4 us``), and so is "the change since the previous run".

Text read from a stored run (benchmark names, environment strings, messages, paths) may come
from anyone who can open a pull request. It is escaped for where it is shown, one function per
target: ``terminal`` (no control bytes: an ESC sequence cannot clear the screen or hide a line),
``markdown`` (one line of inert text in a paragraph, heading, list item or table cell),
``markdown_block`` (lines as a fenced code block no line can close) and ``html``.
"""

from __future__ import annotations

import html as _html
import math
import re
from collections.abc import Sequence

MISSING = "-"  # a cell with nothing measured


# --- numbers -------------------------------------------------------------------------------------
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
    if fraction is None or not math.isfinite(fraction):
        return MISSING
    return f"{fraction * 100:+.1f} %" if signed else f"{fraction * 100:.1f} %"


def fmt_change(before: float | None, after: float | None) -> str:
    """The change from ``before`` to ``after`` (a previous run's median to this one's):
    '+3.1 %'; '-' when either is missing or ``before`` is not positive."""
    if before is None or after is None or not before > 0:
        return MISSING
    return fmt_percent(after / before - 1, signed=True)


def fmt_instructions(count: float) -> str:
    """Instructions per call: '155,915 instr'."""
    return f"{count:,.0f} instr"


def fmt_iqr(quartiles: tuple[float, float] | None) -> str:
    """The interquartile range of (q1, q3) seconds as a time; '-' without quartiles."""
    return MISSING if quartiles is None else fmt_time(quartiles[1] - quartiles[0])


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


# --- names as file names -------------------------------------------------------------------------
def slug(text: str, empty: str = "unknown") -> str:
    """A name that is one file or folder name and nothing more: letters, digits, '.', '_' and
    '-', never starting with '.' (so never '.' or '..'); ``empty`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-").lstrip(".") or empty


# --- stored text, escaped for where it is shown --------------------------------------------------
# C0 controls (newline, ESC, ...), DEL, C1 controls (a lone 0x9b is a CSI on some terminals) and
# the bidirectional overrides that reorder what a reader sees
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# a stored backslash is escaped too (it cannot un-escape the character after it); an underscore
# between two letters or digits cannot open or close emphasis (CommonMark), so test_name stays
_MARKDOWN = re.compile(r"[\\`*\[\]<>&!#|]|(?<![^\W_])_|_(?![^\W_])")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """``text`` safe to print on a terminal: every control character (newline and ESC
    included) shown as an escape such as ``\\x1b``, so it can neither move the cursor, clear
    the screen, colour or hide text, nor start a line of its own."""
    return _CONTROL.sub(_visible, str(text))


def markdown(text: object) -> str:
    """``text`` as one line of inert CommonMark/GitHub markdown, for a paragraph, heading, list
    item or table cell: control characters as in ``terminal`` (a newline cannot end a line,
    a heading or a table row), and every character that could start markup (``|``, backticks,
    ``<``, ``>``, ``&``, ``[``, ``]``, ``!``, ``*``, ``_``, ``#``, ``\\``) backslash-escaped: no
    link, image, HTML, entity, emphasis, heading or table cell comes from it, and it can be the
    text of a link of ours."""
    return _MARKDOWN.sub(lambda match: "\\" + match.group(), terminal(text))


def markdown_block(lines: Sequence[object]) -> list[str]:
    """``lines`` as a fenced code block (no markup inside), its fence longer than any run of
    backticks in them, so no line can close it; control characters as in ``terminal``."""
    shown = [terminal(line) for line in lines]
    longest = max((len(run) for line in shown for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *shown, fence]


def html(text: object) -> str:
    """``text`` as HTML text or an attribute value (quotes escaped too), controls as in
    ``terminal``."""
    return _html.escape(terminal(text), quote=True)
