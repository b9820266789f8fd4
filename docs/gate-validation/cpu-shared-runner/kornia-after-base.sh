#!/usr/bin/env bash
# kornia: after its baseline, the injection (sized from the baseline's count of the 256x256
# rgb_to_yuv case: 1 %, in statements of ~40.5 instructions) in a copy of the project, beside
# the unchanged sessions in the project itself.
cd /tmp/val2 || exit 1
while [ ! -f runs/kornia/base/rc ]; do sleep 10; done
f=$(ls kornia/.benchmarks/*/0001_ibase.json)
n=$(python3 -c "
import json; d = json.load(open('$f'))
c = {b['name']: b['extra_info']['instructions'] for b in d['benchmarks']}
print(round(0.01 * c['test_rgb_to_yuv_benchmark[cpu-float32--256-256-3-1]'] / 40.5))")
echo "statements $n"
rm -rf kornia-inj && cp -r kornia kornia-inj
printf '{"target": "kornia.color.yuv:rgb_to_yuv", "also": ["kornia.color:rgb_to_yuv"], "statements": %s}\n' "$n" > kornia-inj/inline_inject.json
PROJDIR=kornia-inj tools/isession.sh kornia inject --perf-gate --perf-callgrind-layouts=1 -p inline_inject &
for i in $(seq -w 1 10); do
  [ "$(date +%s)" -lt 1795658700 ] || break
  tools/isession.sh kornia null-$i --perf-gate --perf-callgrind-layouts=1
done
wait
