#!/usr/bin/env bash
# Session 12, the time part on cattrs (14 cases, as s11-time.sh): a single baseline recorded
# under load, unchanged sessions against it until UNTIL_EPOCH (at most 10), the 4x of one case
# twice; with `set`, then a baseline set of 3, the 4x against it, unchanged sessions against it
# until UNTIL_EPOCH. Each session's gate.json and log keep every case's change.
#   s12-time.sh PREFIX UNTIL_EPOCH [set]
# Run as `s12-time.sh s12 ...` with the wheel of 95d9619 (judged on the medians), then as
# `s12-time.sh s12b ... set` with the wheel of 625623f (judged on the fastest rounds).
export ROOT=/tmp/val2
. "$(dirname "$0")/steps.sh"
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
export INJECT4X_FUNC='cattrs:Converter.structure'
p=$1
$S "$p-base-single" --benchmark-save="${p}single"
nulls "$p-null-single" "$2"
for i in 1 2; do INJECT4X_NODE=$node $S "$p-inject-single-$i" -p inject4x --perf-gate; done
[ "${3:-}" = set ] || exit 0
for i in 1 2 3; do $S "$p-base-set-$i" --benchmark-save="${p}set"; done
INJECT4X_NODE=$node $S "$p-inject-set" -p inject4x --perf-gate
nulls "$p-null-set" "$2"
