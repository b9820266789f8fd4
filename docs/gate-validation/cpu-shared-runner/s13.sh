#!/usr/bin/env bash
# Session 13's timed sessions (session13.md), each session's rounds kept (--benchmark-json) for
# replay.py. ROOT as setup.sh made it (/tmp/val2), the projects copied as kornia-t1 (one thread,
# its own store) and cattrs-t; VENV: the wheel under test.
#   s13.sh old-kornia PREFIX N [hog]  the session-12 wheel, kornia-t1 against its set (s12set)
#   s13.sh old-cattrs PREFIX N        the session-12 wheel, cattrs-t against its set (s12bset)
#   s13.sh new PROJECT PREFIX N yes|no [--benchmark-compare=NNNN]   the new wheel (venv-*13)
#   s13.sh spread WAIT_S N            the new wheel, kornia-t2 (a copy with an empty store):
#                                     a set saved in 3 sessions WAIT_S apart, then sessions
# Each: N unchanged gated sessions PREFIX-null-NN, then the 4x of one case twice; `hog`/`yes`: a
# memory-streaming neighbour (hog.py) beside the whole series, on top of session.sh's busy loops.
set -uo pipefail
export ROOT=${ROOT:-/tmp/val2}
HERE=$(cd "$(dirname "$0")" && pwd)
KNODE='benchmarks/color/yuv_test.py::test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'
CNODE='bench/test_tuples.py::test_structure_hetero_tuple[True-Converter]'

series() {  # series PROJECT PREFIX N [pytest arguments...]: N unchanged sessions, then the 4x twice
  local project=$1 p=$2 n=$3 i
  shift 3
  for i in $(seq -w 1 "$n"); do
    "$HERE/session.sh" "$project" "$p-null-$i" --perf-gate "$@" \
      --benchmark-json="$ROOT/runs/$project/$p-null-$i/current.json"
  done
  for i in 1 2; do
    INJECT4X_NODE=$node "$HERE/session.sh" "$project" "$p-inject-$i" -p inject4x --perf-gate "$@" \
      --benchmark-json="$ROOT/runs/$project/$p-inject-$i/current.json"
  done
}

neighbour() { "$VENV/bin/python" "$HERE/hog.py" & hog=$!; }

mode=${1:-}
case $mode in
  old-kornia|old-cattrs|new) ;;
  spread)
    export VENV=$ROOT/venv-kornia13 OMP_NUM_THREADS=1 INJECT4X_FUNC='@module:rgb_to_yuv' node=$KNODE
    for i in 1 2 3; do
      "$HERE/session.sh" kornia-t2 "s13s-base-$i" --benchmark-save=spread
      [ "$i" = 3 ] || sleep "$2"
    done
    series kornia-t2 s13s "$3"
    exit 0 ;;
  *) echo "usage: see the head of $0" >&2; exit 2 ;;
esac
if [ "$mode" = new ]; then
  project=$2; shift
else
  project=$([ "$mode" = old-kornia ] && echo kornia-t1 || echo cattrs-t)
fi
case $project in
  kornia-t1) export OMP_NUM_THREADS=1 INJECT4X_FUNC='@module:rgb_to_yuv' node=$KNODE
             export VENV=$ROOT/venv-kornia$([ "$mode" = new ] && echo 13 || echo -t) ;;
  cattrs-t)  export INJECT4X_FUNC='cattrs:Converter.structure' node=$CNODE
             export VENV=$ROOT/venv-cattrs$([ "$mode" = new ] && echo 13) ;;
esac
[ "${4:-no}" = hog ] || [ "${4:-no}" = yes ] && neighbour
series "$project" "$2" "$3" "${@:5}"
[ -n "${hog:-}" ] && kill "$hog"
exit 0
