"""Summary of the sessions session.sh left in $ROOT/runs/<project>/<label>/: exit code, wall
time, load average, and from gate.json the count of each verdict (not-gated ones by reason), the
cases confirmed as regressions, and whether the machine-wide shift rule fired. Markdown on
stdout.   python3 summarize.py [ROOT]"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HEADER = [
    "| session | exit | wall s | load 1-min start/end | cases (gated) | verdicts "
    "| confirmed regressions | shift rule |",
    "|---|---|---|---|---|---|---|---|",
]
LOOSE = "that its noise needs"  # a noisy case judged at the loose threshold its noise needs


def read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def session(folder: Path) -> dict:
    load = read(folder / "load.txt")
    wall = re.search(r"wall ([\d.]+) s", load)
    log = read(folder / "log.txt")
    gate = folder / "gate.json"
    rows = json.loads(gate.read_text())["rows"] if gate.exists() else []
    counts = Counter(
        row["verdict"] if row["verdict"] != "not gated" else f"not gated: {row['reason']}"
        for row in rows
    )
    return dict(
        rc=read(folder / "rc").strip() or "?",
        wall=f"{float(wall.group(1)):.0f}" if wall else "?",
        load="/".join(re.findall(r"Z (\d+\.\d+)", load)),
        counts=counts,
        regressions=[
            f"{row['name']} ({row['change_percent']:+.0f}%)"
            for row in rows
            if row["verdict"] == "regression"
        ],
        shift=any(row.get("shift") for row in rows),
        cases=len(rows),
        gated=sum(bool(row.get("gated")) for row in rows),
        loose=sum(LOOSE in (row.get("message") or "") for row in rows),
        traceback="Traceback" in log or "INTERNALERROR" in log,
    )


def line(name: str, s: dict) -> str:
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items())) or "-"
    if s["loose"]:
        verdicts += f" ({s['loose']} judged at a noisy case's loose threshold)"
    if s["traceback"]:
        verdicts += " **traceback**"
    cases = f"{s['cases']} ({s['gated']})" if s["cases"] else "-"
    return (
        f"| {name} | {s['rc']} | {s['wall']} | {s['load']} | {cases} | {verdicts} | "
        f"{'; '.join(s['regressions']) or '-'} | {'fired' if s['shift'] else '-'} |"
    )


def table(project: Path) -> list[str]:
    folders = sorted(p for p in project.iterdir() if p.is_dir())
    lines = [f"### {project.name}", "", *HEADER]
    lines += [line(folder.name, session(folder)) for folder in folders]
    for kind in ("set", "single"):
        group = [session(f) for f in folders if f.name.startswith(f"null-{kind}-")]
        group = [s for s in group if s["rc"] != "?"]  # finished sessions only
        if group:
            lines += [
                "",
                f"null sessions against the {kind}: "
                f"{sum(s['rc'] != '0' for s in group)} of {len(group)} exited non-zero; "
                f"confirmed regressions {sum(len(s['regressions']) for s in group)}; "
                f"cases gated {sum(s['gated'] for s in group)} of "
                f"{sum(s['cases'] for s in group)}; "
                f"shift rule fired in {sum(s['shift'] for s in group)}",
            ]
    return [*lines, ""]


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/val") / "runs"
    for project in sorted(p for p in root.iterdir() if p.is_dir()):
        print("\n".join(table(project)))


if __name__ == "__main__":
    main()
