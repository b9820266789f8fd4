#!/usr/bin/env bash
# Everything for one project, in order (session.sh adds the load to each session):
#   baselines: `single` once, `set` three times (--benchmark-save; perfgate's baseline set);
#   the 4x slowdown of one case (inject4x.py) gated against the single baseline and the set;
#   then $SETS (default 10) gated sessions of unchanged code against the set (the newest run), each followed,
#   for the first $SINGLES (default 10), by one against the single baseline
#   (--benchmark-compare=0001).
#   [NULLS_ONLY=1] [SETS=N] [SINGLES=N] run_all.sh cattrs|kornia|kornia-t1
# kornia-t1: a copy of the kornia project run with OMP_NUM_THREADS=1 (torch's default on this
# machine is 2 threads, which under load stall for a scheduler tick: see README.md).
set -uo pipefail
ROOT=${ROOT:-/tmp/val}
project=$1
S="$ROOT/session.sh $project"
case ${project%%-*} in
  cattrs) node='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'
          func='cattrs:Converter.structure' ;;
  kornia) node='benchmarks/color/yuv_test.py::test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'
          func='@module:rgb_to_yuv' ;;
esac
if [ "$project" = kornia-t1 ]; then
  export OMP_NUM_THREADS=1
  [ -d "$ROOT/kornia-t1" ] || { cp -r "$ROOT/kornia" "$ROOT/kornia-t1" && rm -rf "$ROOT/kornia-t1/.benchmarks" "$ROOT/kornia-t1/perfgate-results"; }
fi
if [ -z "${NULLS_ONLY:-}" ]; then
  $S base-single --benchmark-save=single
  for i in 1 2 3; do $S base-set-$i --benchmark-save=set; done
  INJECT4X_NODE=$node INJECT4X_FUNC=$func $S inject-single -p inject4x --perf-gate --benchmark-compare=0001
  INJECT4X_NODE=$node INJECT4X_FUNC=$func $S inject-set -p inject4x --perf-gate
fi
for i in $(seq -w 1 "${SETS:-10}"); do
  [ -d "$ROOT/runs/$project/null-set-$i" ] || $S null-set-$i --perf-gate
  if [ "$((10#$i))" -le "${SINGLES:-10}" ] && [ ! -d "$ROOT/runs/$project/null-single-$i" ]; then
    $S null-single-$i --perf-gate --benchmark-compare=0001
  fi
done
