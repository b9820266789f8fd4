#!/usr/bin/env bash
# Session 12, the time part on kornia (15 cases of benchmarks/color, one thread, as kornia-t1 in
# run_all.sh) with the wheel that judges a case against the session on its fastest rounds, in
# its own virtual environment (venv-kornia-t): a single baseline recorded under load, the 4x of
# one case, unchanged sessions until UNTIL_EPOCH (at most 10); `set`: instead, a baseline set of
# 3, the 4x against it, unchanged sessions against it until UNTIL_EPOCH.
#   s12-ktime.sh UNTIL_EPOCH [set]
export ROOT=/tmp/val2 VENV=/tmp/val2/venv-kornia-t OMP_NUM_THREADS=1
. "$(dirname "$0")/steps.sh"
S="$ROOT/tools/tsession2.sh kornia-t1"
node='benchmarks/color/yuv_test.py::test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'
[ -d "$ROOT/kornia-t1" ] || { cp -r "$ROOT/kornia" "$ROOT/kornia-t1" && rm -rf "$ROOT/kornia-t1/.benchmarks" "$ROOT/kornia-t1/perfgate-results"; }
export INJECT4X_FUNC='@module:rgb_to_yuv'
if [ "${2:-}" = set ]; then
  for i in 1 2 3; do $S "s12-base-set-$i" --benchmark-save=s12set; done
  INJECT4X_NODE=$node $S s12-inject-set -p inject4x --perf-gate
  nulls s12-null-set "$1"
  exit 0
fi
$S s12-base-single --benchmark-save=s12single
INJECT4X_NODE=$node $S s12-inject-single -p inject4x --perf-gate
nulls s12-null-single "$1"
