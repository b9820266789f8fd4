#!/usr/bin/env bash
# Session 11, the time part continued (after s11-time.sh): the 4x against the single baseline once
# more, then a baseline set of 3, the 4x against it, unchanged sessions against it until UNTIL_EPOCH.
export ROOT=/tmp/val2
. "$(dirname "$0")/steps.sh"
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
export INJECT4X_FUNC='cattrs:Converter.structure'
INJECT4X_NODE=$node $S s11-inject-single-2 -p inject4x --perf-gate --benchmark-compare=s11single
for i in 1 2 3; do $S "s11-base-set-$i" --benchmark-save=s11set; done
INJECT4X_NODE=$node $S s11-inject-set -p inject4x --perf-gate
nulls s11-null-set "$1"
