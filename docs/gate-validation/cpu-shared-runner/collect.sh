#!/usr/bin/env bash
# What goes into git from $ROOT (the raw logs stay out): the session table (summarize.py), the
# gate.json of the injected sessions, of every null session that exited non-zero, and of the
# edge cases, and the edge cases' one-line summary and the end of each Ctrl-C session's output.
set -uo pipefail
ROOT=${ROOT:-/tmp/val}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/results
mkdir -p "$OUT"
python3 "$HERE/summarize.py" "$ROOT" > "$OUT/sessions.md"
for dir in "$ROOT"/runs/*/*/; do
  project=$(basename "$(dirname "$dir")") label=$(basename "$dir")
  rc=$(cat "$dir/rc" 2>/dev/null || echo "?")
  if [[ $label == inject-* ]] || { [[ $label == null-* ]] && [ "$rc" != 0 ]; }; then
    [ -f "$dir/gate.json" ] && cp "$dir/gate.json" "$OUT/$project-$label.gate.json"
  fi
done
for name in r3-null r3-4x r200k-null r200k-4x odd-gate; do
  cp "$ROOT/runs-extra/$name.json" "$OUT/extra-$name.gate.json"
done
cp "$ROOT/runs-extra/summary.txt" "$OUT/extras-summary.txt"
for f in "$ROOT"/runs-extra/sigint-*.log; do
  { echo "== $(basename "$f") (last 6 lines)"; tail -n 6 "$f"; } >> "$OUT/sigint-tails.txt.new"
done
mv "$OUT/sigint-tails.txt.new" "$OUT/sigint-tails.txt"
ls "$OUT"
