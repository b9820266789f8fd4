"""The B/A ratio of every block pair's medians in A/B results folders (unchanged code: A and B
are the same code): how many lie within +-5 %, how many past 1.3x either way.

``python3 pair_ratios.py RESULTS_DIR ...`` (each holding ab-blocks/ of perfgate check).
"""

import collections
import glob
import gzip
import json
import statistics
import sys

for run in sys.argv[1:]:
    medians = collections.defaultdict(dict)
    for path in sorted(glob.glob(f"{run}/ab-blocks/lane0-pair*-*.json.gz")):
        pair = int(path.split("pair")[1].split("-")[0])
        label = path.split("-")[-1][0]
        for case in json.loads(gzip.decompress(open(path, "rb").read()))["benchmarks"]:
            medians[case["fullname"]].setdefault(pair, {})[label] = case["stats"]["median"]
    ratios = [p["B"] / p["A"] for pairs in medians.values() for p in pairs.values() if len(p) == 2]
    within = sum(abs(r - 1) <= 0.05 for r in ratios)
    far = sum(r > 1.3 or r < 1 / 1.3 for r in ratios)
    print(
        f"{run}: {len(medians)} cases, {len(ratios)} block pairs; B/A of a pair's block medians: "
        f"median {statistics.median(ratios):.3f}, within +-5 % {within / len(ratios):.0%}, "
        f"past 1.3x either way {far / len(ratios):.0%}"
    )
