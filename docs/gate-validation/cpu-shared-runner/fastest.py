"""Per case of each timed session, the fastest round (`Min`) and the median of the baseline and of
the session, read from the comparison table pytest-benchmark prints beside the gate (log.txt of
session.sh), with the session's robust spread of both changes. Session 12's evidence that a busy
machine moves medians, not fastest rounds (session12.md).
    python3 fastest.py ROOT/runs/PROJECT/LABEL ... > rounds.csv     (a summary on stderr)"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
from pathlib import Path

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
CELL = r"\s+([\d,.]+) \([\d.]+\)"  # a figure and its ratio to the best row, e.g. 2.1690 (1.01)
ROW = re.compile(r"(test_\S+) \((NOW|\d{4}_\w+)\)" + CELL * 5)


def cases(log: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """{case: {"base"|"now": (min, median) in seconds}} from one session's log."""
    found: dict[str, dict[str, tuple[float, float]]] = {}
    unit = 1.0
    for line in log.read_text(errors="replace").splitlines():
        if header := re.match(r"Name \(time in (\w+)\)", line):
            unit = UNITS[header.group(1)]
        elif row := ROW.match(line):
            side = "now" if row.group(2) == "NOW" else "base"
            fastest, median = (float(row.group(i).replace(",", "")) * unit for i in (3, 7))
            found.setdefault(row.group(1), {})[side] = (fastest, median)
    return {name: sides for name, sides in found.items() if len(sides) == 2}


def spread(logs: list[float]) -> float:
    center = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - center) for x in logs)


def main(folders: list[str]) -> None:
    out = csv.writer(sys.stdout)
    out.writerow(["session", "case", "base_min_s", "now_min_s", "base_median_s", "now_median_s"])
    for folder in map(Path, folders):
        rows = cases(folder / "log.txt")
        if not rows:
            continue
        session = f"{folder.parent.name}/{folder.name}"
        for name, sides in sorted(rows.items()):
            out.writerow([session, name, *sides["base"][:1], *sides["now"][:1],
                          *sides["base"][1:], *sides["now"][1:]])  # fmt: skip
        fastest = [math.log(s["now"][0] / s["base"][0]) for s in rows.values()]
        medians = [math.log(s["now"][1] / s["base"][1]) for s in rows.values()]
        print(f"{session}: {len(rows)} cases; fastest rounds {math.exp(min(fastest)) - 1:+.1%}"
              f"..{math.exp(max(fastest)) - 1:+.1%} (spread {spread(fastest):.3f}), medians "
              f"{math.exp(min(medians)) - 1:+.1%}..{math.exp(max(medians)) - 1:+.1%} (spread "
              f"{spread(medians):.3f})", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
