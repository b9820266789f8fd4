#!/usr/bin/env bash
# Session 12: the time part on cattrs against a single baseline recorded under load, as
# s11-time.sh: the baseline, unchanged sessions until UNTIL_EPOCH (at most 10), the 4x slowdown
# of one case twice; each session's gate.json keeps every case's change for the spread rule.
#   s12-time.sh UNTIL_EPOCH
export ROOT=/tmp/val2
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
export INJECT4X_FUNC='cattrs:Converter.structure'
$S s12-base-single --benchmark-save=s12single
for i in $(seq -w 1 10); do
  [ "$(date +%s)" -lt "$1" ] || break
  $S "s12-null-single-$i" --perf-gate
done
for i in 1 2; do INJECT4X_NODE=$node $S "s12-inject-single-$i" -p inject4x --perf-gate; done
