#!/usr/bin/env bash
# Cost of perfgate when asked (issue 21): a project of 12 pure-Python micro-benchmarks
# (pytest-benchmark's default calibration), a baseline saved in .benchmarks/, then
# `pytest` and `pytest --perf-gate` alternated PAIRS times, each under /usr/bin/time (wall s,
# peak RSS KB); then `perfgate compare` of two saved runs. Prints raw lines; summarize with
# summarize.py.
#   cost.sh PYTHON_BIN_DIR WORK_DIR [PAIRS] [BASELINE] [--virtual]
# BASELINE: "perfgate" (saved by an asked session: bounded per-round data) or "pytest-benchmark"
# (saved by pytest-benchmark alone with --benchmark-save-data: every round, ~73 MB).
# --virtual: the tests on a virtual clock (micro_project.py says why).
set -u
bin=$1 work=$2 pairs=${3:-3} baseline=${4:-perfgate} virtual=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && "$bin/python" "$here/micro_project.py" "$work" $virtual && cd "$work" || exit 2
quiet=(-q -p no:cacheprovider)
if [ "$baseline" = perfgate ]; then
    "$bin/python" -m pytest "${quiet[@]}" --benchmark-save=base --perf-store-profiles=never >/dev/null
else
    "$bin/python" -m pytest "${quiet[@]}" --benchmark-save=base --benchmark-save-data >/dev/null
fi
echo "baseline $baseline: $(du -b .benchmarks/*/0001_base.json | cut -f1) bytes"
timed() {  # label, command...: one line "label wall_s peak_rss_kb exit"
    local label=$1; shift
    /usr/bin/time -f "%e %M %x" -o time.txt "$@" >out.txt 2>&1
    echo "$label $(cat time.txt | tail -1) | $(grep -E 'perfgate gate against|passed|failed' out.txt | tr '\n' ' ' | cut -c1-200)"
}
for i in $(seq "$pairs"); do
    timed plain "$bin/python" -m pytest "${quiet[@]}"
    timed gate "$bin/python" -m pytest "${quiet[@]}" --perf-gate
done
# a second saved run, then perfgate compare of the two (as a user would: the newest two)
"$bin/python" -m pytest "${quiet[@]}" --benchmark-save=second --perf-store-profiles=never >/dev/null
echo "second run: $(du -b .benchmarks/*/0002_second.json | cut -f1) bytes"
for i in $(seq "$pairs"); do
    timed compare "$bin/perfgate" compare
    timed compare-filter "$bin/perfgate" compare --filter test_sum_list
done
