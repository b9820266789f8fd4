"""Summary of the instruction-count sessions isession.sh left in $ROOT/runs/<project>/<label>/:
exit code, wall time, load average, the gate's verdicts, the cases named as regressions (with
their change), the largest change of the cases left unchanged, and the seconds each case's count
took in the counting process. Markdown on stdout.   python3 isummarize.py [ROOT [PREFIX]]
(PREFIX: only the sessions whose label starts with it, e.g. s11-)."""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

HEADER = [
    "| session | exit | wall s | load 1-min start/end | verdicts | named as regressions "
    "| largest change among the others | s a case (median, max) |",
    "|---|---|---|---|---|---|---|---|",
]


def read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def short(name: str) -> str:
    return name.split("::", 1)[-1]


def session(folder: Path) -> str:
    load = read(folder / "load.txt")
    wall = re.search(r"wall ([\d.]+) s", load)
    gate = folder / "gate.json"
    rows = json.loads(gate.read_text())["rows"] if gate.exists() else []
    counts = Counter(row["verdict"] for row in rows)
    for row in rows:  # before session 11, an instruction row's change was in its message only
        found = re.search(r"baseline [\d,]+ \(([+-][\d.]+)%", row.get("message") or "")
        if row.get("change_percent") is None and found:
            row["change_percent"] = float(found.group(1))
    named = [r for r in rows if r["verdict"] == "regression"]
    others = [r for r in rows if r["verdict"] != "regression" and r["change_percent"] is not None]
    largest = max(others, key=lambda r: abs(r["change_percent"]), default=None)
    logs = "".join(read(p) for p in sorted(folder.glob("callgrind-*.log")))
    seconds = [float(s) for s in re.findall(r"counted in ([\d.]+) s", logs)]
    log = read(folder / "log.txt")
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"
    if "Traceback" in log or "INTERNALERROR" in log:
        verdicts += " **traceback**"
    cost = f"{statistics.median(seconds):.0f}, {max(seconds):.0f}" if seconds else "-"
    names = "; ".join(f"{short(r['name'])} ({r['change_percent']:+.2f}%)" for r in named) or "-"
    rest = f"{short(largest['name'])} {largest['change_percent']:+.3f}%" if largest else "-"
    cells = [
        folder.name,
        read(folder / "rc").strip() or "?",
        f"{float(wall.group(1)):.0f}" if wall else "?",
        "/".join(re.findall(r"Z (\d+\.\d+)", load)),
        verdicts,
        names,
        rest,
        cost,
    ]
    return "| " + " | ".join(cells) + " |"


def main(root: Path, prefix: str = "") -> None:
    for project in sorted(p for p in (root / "runs").iterdir() if p.is_dir()):
        folders = sorted(p for p in project.iterdir() if p.is_dir() and p.name.startswith(prefix))
        if not folders:
            continue
        print(f"### {project.name}\n")
        print("\n".join(HEADER))
        for folder in folders:
            print(session(folder))
        print()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/val2"), *sys.argv[2:3])
