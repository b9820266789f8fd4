#!/usr/bin/env bash
# Session 12, the time part with the wheel that judges a case against the session on its fastest
# rounds: a single baseline recorded under load, 10 unchanged sessions, the 4x of one case twice;
# then a baseline set of 3, the 4x against it, unchanged sessions against it until UNTIL_EPOCH.
#   s12-time2.sh UNTIL_EPOCH
export ROOT=/tmp/val2
S="$ROOT/tools/tsession.sh cattrs-t"
node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
export INJECT4X_FUNC='cattrs:Converter.structure'
$S s12b-base-single --benchmark-save=s12bsingle
for i in $(seq -w 1 10); do $S "s12b-null-single-$i" --perf-gate; done
for i in 1 2; do INJECT4X_NODE=$node $S "s12b-inject-single-$i" -p inject4x --perf-gate; done
for i in 1 2 3; do $S "s12b-base-set-$i" --benchmark-save=s12bset; done
INJECT4X_NODE=$node $S s12b-inject-set -p inject4x --perf-gate
for i in $(seq -w 1 10); do
  [ "$(date +%s)" -lt "$1" ] || break
  $S "s12b-null-set-$i" --perf-gate
done
