#!/usr/bin/env bash
# Session 13: cattrs (10 counted cases) with the default three counting layouts and the new wheel
# (VENV): a baseline, unchanged gated sessions until UNTIL_EPOCH (at most 10), then the ~1 %
# injection (one statement in BaseConverter.unstructure) in a copy of the project.
#   s13-i3.sh UNTIL_EPOCH
export ROOT=${ROOT:-/tmp/val2} VENV=${VENV:-/tmp/val2/venv-cattrs13}
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/isession.sh" cattrs s13-i3-base --benchmark-save=i3
for i in $(seq -w 1 10); do
  [ "$(date +%s)" -lt "$1" ] || break
  "$HERE/isession.sh" cattrs "s13-i3-null-$i" --perf-gate
done
cd "$ROOT" && rm -rf cattrs-inj && cp -r cattrs cattrs-inj
cp "$HERE/inline_inject.py" cattrs-inj/
echo '{"target": "cattrs.converters:BaseConverter.unstructure", "statements": 1}' > cattrs-inj/inline_inject.json
PROJDIR=cattrs-inj "$HERE/isession.sh" cattrs s13-i3-inject --perf-gate -p inline_inject
