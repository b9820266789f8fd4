#!/usr/bin/env bash
# The edge cases, in a copy of the cattrs project (its own store and perfgate-results/), each
# session beside the same load as session.sh (two busy-loop processes):
#   r3:    one quick case at 3 rounds (--benchmark-min-rounds=3, max-time 1 us): baseline, gated
#          unchanged, gated with the 4x slowdown
#   r200k: one quick case at 200,000 rounds: the same three, under /usr/bin/time (peak memory)
#   odd:   parameters JSON cannot hold (a class, an enum, NaN, bytes, an object) and one with
#          terminal control characters: saved, then gated
#   sigint: Ctrl-C (SIGINT) in the last case and just after it (while perfgate saves) of a
#          saving session: exit 2, the run saved or kept in perfgate-results/unsaved/
#   extras.sh [r3] [r200k] [odd] [sigint]     (default: all; the copy is made afresh only for all)
set -uo pipefail
parts=${*:-r3 r200k odd sigint}
ROOT=${ROOT:-/tmp/val}
HERE=$(cd "$(dirname "$0")" && pwd)
P=$ROOT/cattrs-extra
if [ $# = 0 ]; then
  rm -rf "$P" && cp -r "$ROOT/cattrs" "$P" && rm -rf "$P/.benchmarks" "$P/perfgate-results"
  cp "$HERE/odd_params.py" "$P/bench/test_odd_params.py"
fi
cd "$P"
PY=$ROOT/venv-cattrs/bin/python
OUT=$ROOT/runs-extra; mkdir -p "$OUT"
QUICK='bench/test_primitives.py::test_unstructure_float[BaseConverter]'

one() {  # one LABEL [pytest args...]: a session beside the load; log, exit code, peak memory
  local label=$1; shift
  local b=(); for _ in 1 2; do python3 -c 'while True: pass' & b+=($!); done
  PYTHONPATH=$ROOT/inject /usr/bin/time -f "wall %e s, peak RSS %M KB" "$PY" -m pytest \
    --color=no -p no:cacheprovider "$@" > "$OUT/$label.log" 2>&1
  local rc=$?
  kill "${b[@]}"; wait "${b[@]}" 2>/dev/null
  echo "$label rc=$rc $(tail -1 "$OUT/$label.log")" | tee -a "$OUT/summary.txt"
}

slow() { INJECT4X_NODE=$QUICK INJECT4X_FUNC=cattrs:BaseConverter.unstructure "$@"; }

has() { [[ " $parts " == *" $1 "* ]]; }

R3=(--benchmark-min-rounds=3 --benchmark-max-time=0.000001 --benchmark-storage=file://$P/store-r3)
if has r3; then
one r3-base "$QUICK" "${R3[@]}" --benchmark-save=r3
one r3-null "$QUICK" "${R3[@]}" --perf-gate --perf-gate-report="$OUT/r3-null.md"
slow one r3-4x "$QUICK" "${R3[@]}" -p inject4x --perf-gate --perf-gate-report="$OUT/r3-4x.md"
fi

R200=(--benchmark-min-rounds=200000 --benchmark-storage=file://$P/store-r200k)
if has r200k; then
one r200k-base "$QUICK" "${R200[@]}" --benchmark-save=r200k
one r200k-null "$QUICK" "${R200[@]}" --perf-gate --perf-gate-report="$OUT/r200k-null.md"
slow one r200k-4x "$QUICK" "${R200[@]}" -p inject4x --perf-gate --perf-gate-report="$OUT/r200k-4x.md"
fi

ODD=(bench/test_odd_params.py --benchmark-storage=file://$P/store-odd)
if has odd; then
one odd-base "${ODD[@]}" --benchmark-save=odd --benchmark-json="$OUT/odd.json"
one odd-gate "${ODD[@]}" --perf-gate --perf-gate-report="$OUT/odd-gate.md"
grep -c $'\x1b' "$OUT"/odd-*.log "$OUT"/odd-gate.md | sed 's/^/raw ESC bytes: /' | tee -a "$OUT/summary.txt"
fi

# Ctrl-C: at the start of the last of 4 cases, and as soon as the session has printed [100%]
has sigint || exit 0
SIG=(bench/test_primitives.py --benchmark-storage=file://$P/store-sigint)
for when in last-case after-100pct; do
  b=(); for _ in 1 2; do python3 -c 'while True: pass' & b+=($!); done
  # a command started with & in a script ignores SIGINT: env gives it back its default
  env --default-signal=INT "$PY" -m pytest --color=no -p no:cacheprovider "${SIG[@]}" --benchmark-save=sigint-$when \
    > "$OUT/sigint-$when.log" 2>&1 &
  pid=$!
  if [ $when = last-case ]; then pattern='py \.\.\.'; else pattern='100%'; fi
  until grep -q "$pattern" "$OUT/sigint-$when.log" || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
  [ $when = last-case ] && sleep 1
  kill -INT $pid; wait $pid; rc=$?
  kill "${b[@]}"; wait "${b[@]}" 2>/dev/null
  echo "sigint-$when rc=$rc store: $(ls store-sigint 2>/dev/null | tr '\n' ' ') unsaved: $(ls perfgate-results/unsaved 2>/dev/null | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
