#!/usr/bin/env bash
cd /tmp/val2 || exit 1
tools/isession.sh cattrs inject --perf-gate --perf-callgrind-layouts=1 -p inline_inject
for i in $(seq -w 2 10); do
  [ "$(date +%s)" -lt "$(date -d 02:03 +%s)" ] || break
  tools/isession.sh cattrs null-$i --perf-gate --perf-callgrind-layouts=1
done
