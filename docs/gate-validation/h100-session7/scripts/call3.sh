# Call 3: detection with the sleep set per case in cycles (cycles3.json, from call 2b's real sizes:
# aimed at +4 %), every B block the same cycles; 26 injected cases and 1 null case (not in the
# table: A and B run the same code) in one A/B of the nightly (3 blocks, 2 more for undecided).
set -u
R=/tmp/r3; mkdir -p $R/det
pack() { tar czf $OUT/call3.tgz -C $R . ; }
git init -q && git add -A && git -c user.name=s7 -c user.email=s7@x commit -qm s7-detect3
python3 s7/gate_input3.py s7/cases3.json s7/null-gate.json $R/det/gate.json
cp s7/table3.json s7/cycles3.json $R/det/ && cp s7/cycles3.json /tmp/cycles3.json
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
start=$(date +%s)
PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/s7/table3.json \
  PERFGATE_SLOWDOWN_CYCLES=/tmp/cycles3.json PERFGATE_SLOWDOWN_LOG=$R/det/injected.jsonl \
  timeout 570 python3 -m perfgate nightly --results $R/det --confirm-only --screen=-100 \
  --base-ref HEAD --blocks 3 --more-blocks 2 -- --device cuda --perf-tier full > $R/det/terminal.log 2>&1
echo "detection exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
pack
