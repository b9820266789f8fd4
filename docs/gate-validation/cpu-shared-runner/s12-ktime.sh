#!/usr/bin/env bash
# Session 12, the time part on kornia (15 cases of benchmarks/color, one thread, as kornia-t1 in
# run_all.sh) with the wheel that judges a case against the session on its fastest rounds, in
# its own virtual environment (venv-kornia-t): a single baseline recorded under load, the 4x of
# one case, unchanged sessions until UNTIL_EPOCH (at most 10).   s12-ktime.sh UNTIL_EPOCH
export ROOT=/tmp/val2 VENV=/tmp/val2/venv-kornia-t OMP_NUM_THREADS=1
. "$(dirname "$0")/steps.sh"
S="$ROOT/tools/tsession2.sh kornia-t1"
node='benchmarks/color/yuv_test.py::test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'
[ -d "$ROOT/kornia-t1" ] || { cp -r "$ROOT/kornia" "$ROOT/kornia-t1" && rm -rf "$ROOT/kornia-t1/.benchmarks" "$ROOT/kornia-t1/perfgate-results"; }
$S s12-base-single --benchmark-save=s12single
INJECT4X_NODE=$node INJECT4X_FUNC='@module:rgb_to_yuv' $S s12-inject-single -p inject4x --perf-gate
nulls s12-null-single "$1"
