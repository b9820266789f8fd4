#!/usr/bin/env bash
# Session 11: the time part on cattrs with the wheel of main: a single baseline, the 4x slowdown
# of one case, then unchanged sessions until UNTIL_EPOCH (at most 10).   s11-time.sh UNTIL_EPOCH
export ROOT=/tmp/val2
. "$(dirname "$0")/steps.sh"
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
$S s11-base-single --benchmark-save=s11single
INJECT4X_NODE=$node INJECT4X_FUNC='cattrs:Converter.structure' $S s11-inject-single -p inject4x --perf-gate
nulls s11-null-single "$1"
