"""Medians of cost.sh's raw lines per label, and the gate's cost over the plain run."""

import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 4 and parts[0] in ("plain", "gate", "compare", "compare-filter"):
        rows[parts[0]].append((float(parts[1]), int(parts[2]) / 1024))
median = {
    label: [statistics.median(c) for c in zip(*runs, strict=True)] for label, runs in rows.items()
}
for label, (wall, rss) in median.items():
    print(f"{label}: median of {len(rows[label])}: {wall:.2f} s, peak RSS {rss:.0f} MB")
if "plain" in median and "gate" in median:
    (pw, pr), (gw, gr) = median["plain"], median["gate"]
    print(f"gate - plain: +{gw - pw:.2f} s ({gw / pw:.2f}x), +{gr - pr:.0f} MB ({gr / pr:.2f}x)")
