#!/usr/bin/env bash
# One measured session of one project beside a reproducible load: two `python3 -c 'while True:
# pass'` processes (one per core) run from before pytest starts until it ends, on top of
# whatever else the shared machine runs (other helpers: the load average is logged).
#   session.sh PROJECT LABEL [pytest arguments...]      PROJECT: cattrs | kornia | kornia-t1
# (kornia-t1: a copy of the kornia project with its own store, run with OMP_NUM_THREADS=1)
# VENV: another virtual environment than $ROOT/venv-PROJECT.
# Writes $ROOT/runs/PROJECT/LABEL/{log.txt,rc,load.txt,gate.json,gate.md}.
set -uo pipefail
ROOT=${ROOT:-/tmp/val}
project=$1 label=$2; shift 2
out=$ROOT/runs/$project/$label
mkdir -p "$out"
# kornia: 15 of benchmarks/color, eager (--optimizer= : no torch.compile, as its fixture allows)
case ${project%%-*} in
  cattrs) paths=(bench/test_tuples.py bench/test_primitives.py) ;;  # 14 cases
  kornia) paths=(benchmarks/color --optimizer= -k "128-128-3-1 or 256-256-3-1 or 512-512-3-1 or 128-128-1-1 or 237-237-1-1 or 512-512-1-1") ;;
esac
cd "$ROOT/$project" || exit 99
rm -f perfgate-results/gate.json perfgate-results/gate.md
burners=()
for _ in 1 2; do python3 -c 'while True: pass' & burners+=($!); done
echo "start $(date -u +%FT%TZ) $(cat /proc/loadavg)" > "$out/load.txt"
start=$(date +%s.%N)
PYTHONPATH=$ROOT/inject timeout 1500 "${VENV:-$ROOT/venv-${project%%-*}}/bin/python" -m pytest "${paths[@]}" --color=no "$@" > "$out/log.txt" 2>&1
rc=$?
end=$(date +%s.%N)
echo "end   $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> "$out/load.txt"
kill "${burners[@]}"; wait "${burners[@]}" 2>/dev/null
echo "$rc" > "$out/rc"
printf 'wall %.1f s\n' "$(echo "$end - $start" | bc)" >> "$out/load.txt"
for f in gate.json gate.md; do [ -f perfgate-results/$f ] && cp perfgate-results/$f "$out/"; done
echo "$project $label rc=$rc $(tail -1 "$out/load.txt")"
exit 0
