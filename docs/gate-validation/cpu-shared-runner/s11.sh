#!/usr/bin/env bash
# Session 11: instruction sessions of PROJECT with the wheel of main (see instructions-session11.md):
# a baseline, N unchanged gated sessions, one with the ~1 % injection (in a copy of the project).
#   s11.sh PROJECT N LAYOUTS UNTIL_EPOCH
set -u
cd /tmp/val2 || exit 1
project=$1 n=$2 layouts=$3 until=$4
extra=(--perf-callgrind-layouts="$layouts")
if [ "$project" = kornia ]; then
  export KORNIA_TEST_IN_SUBPROCESS=1  # kornia's conftest then skips its torch.compile warm-up
  extra+=(--perf-callgrind-env KORNIA_TEST_IN_SUBPROCESS)
fi
tools/isession.sh "$project" s11-base "${extra[@]}" --benchmark-save=s11base
if [ "$project" = kornia ]; then
  f=$(ls -t kornia/.benchmarks/*/*_s11base.json | head -1)
  statements=$(python3 -c "
import json; d = json.load(open('$f'))
c = {b['name']: b['extra_info']['instructions'] for b in d['benchmarks']}
print(round(0.01 * c['test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'] / 40.5))")
  rm -rf kornia-inj && cp -r kornia kornia-inj
  printf '{"target": "kornia.color.yuv:rgb_to_yuv", "also": ["kornia.color:rgb_to_yuv"], "statements": %s}\n' \
    "$statements" > kornia-inj/inline_inject.json
  PROJDIR=kornia-inj tools/isession.sh kornia s11-inject --perf-gate "${extra[@]}" -p inline_inject
else
  rm -rf cattrs-inj && cp -r cattrs cattrs-inj
  PROJDIR=cattrs-inj tools/isession.sh cattrs s11-inject --perf-gate "${extra[@]}" -p inline_inject
fi
for i in $(seq -w 1 "$n"); do
  [ "$(date +%s)" -lt "$until" ] || break
  tools/isession.sh "$project" "s11-null-$i" --perf-gate "${extra[@]}"
done
