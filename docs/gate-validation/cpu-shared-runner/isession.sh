#!/usr/bin/env bash
# One instruction-count session beside two busy loops (as session.sh); copies the callgrind logs.
#   isession.sh PROJECT LABEL [pytest arguments...]
# VENV: another virtual environment than $ROOT/venv-PROJECT.
set -uo pipefail
ROOT=${ROOT:-/tmp/val2}
project=$1 label=$2; shift 2
out=$ROOT/runs/$project/$label
mkdir -p "$out"
case $project in
  cattrs) paths=(bench/test_tuples.py bench/test_primitives.py -k "unstructure or hetero" -p no:cacheprovider) ;;  # 10 cases
  kornia) paths=(benchmarks/color --optimizer= -k "${KSEL:-128-128-3-1 or 256-256-3-1 or 128-128-1-1 or 237-237-1-1}") ;;
esac
cd "$ROOT/${PROJDIR:-$project}" || exit 99  # PROJDIR: a copy of the project (a session beside another)
rm -rf perfgate-results/gate.json perfgate-results/gate.md perfgate-results/callgrind-*.log
burners=()
for _ in 1 2; do python3 -c 'while True: pass' & burners+=($!); done
echo "start $(date -u +%FT%TZ) $(cat /proc/loadavg)" > "$out/load.txt"
start=$(date +%s.%N)
timeout 1500 "${VENV:-$ROOT/venv-$project}/bin/python" -m pytest "${paths[@]}" --color=no \
  --perf-measure instructions "$@" > "$out/log.txt" 2>&1
rc=$?
end=$(date +%s.%N)
echo "end   $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> "$out/load.txt"
kill "${burners[@]}"; wait "${burners[@]}" 2>/dev/null
echo "$rc" > "$out/rc"
printf 'wall %.1f s\n' "$(echo "$end - $start" | bc)" >> "$out/load.txt"
for f in perfgate-results/gate.json perfgate-results/gate.md perfgate-results/callgrind-*.log; do [ -f "$f" ] && cp "$f" "$out/"; done
echo "$project $label rc=$rc $(tail -1 "$out/load.txt")"
exit 0
