"""The stored comparison's rows (call 1's gate.json) of the cases listed: the A/B's input."""

import json
import sys

cases, gate, out = sys.argv[1:4]
names = set(json.load(open(cases)))
rows = [r for r in json.load(open(gate)) if r["name"].split("::")[-1] in names]
assert len(rows) == len(names), sorted(names - {r["name"].split("::")[-1] for r in rows})
json.dump(rows, open(out, "w"), indent=2)
print(len(rows), "rows")
