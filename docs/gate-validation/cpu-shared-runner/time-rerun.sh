#!/usr/bin/env bash
# The time part once more (main's session rule), cattrs only: a single baseline, the 4x slowdown
# of one case, then unchanged sessions until 02:08.
export ROOT=/tmp/val2
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
$S base-single --benchmark-save=single
INJECT4X_NODE=$node INJECT4X_FUNC='cattrs:Converter.structure' $S inject-single -p inject4x --perf-gate
for i in 1 2 3 4 5; do
  [ "$(date +%s)" -lt "$(date -d 02:08 +%s)" ] || break
  $S null-single-0$i --perf-gate
done
