# Call 2: (1) the count gate on the GPU: one extra kernel per call (gpu-sleep-4) in the host-bound
# ResNet-18 batch-1 eager case against 0005; (2) detection: 21 cases with a slowdown sized per
# case (table.json) in B only, judged by the nightly's A/B (3 blocks, 2 more for undecided cases).
set -u
R=/tmp/r; mkdir -p $R/det $R/counts-injected
pack() { tar czf $OUT/call2.tgz -C $R . ; }
git init -q && git add -A && git -c user.name=s7 -c user.email=s7@x commit -qm s7-detect
start=$(date +%s)
PERFGATE_SLOWDOWN=gpu-sleep-4 timeout 55 python3 -m pytest perf_tests --device cuda --perf-tier full \
  -p no:cacheprovider -p tools.slowdown_plugin -k "test_resnet18_steady and cuda-1-eager" \
  --perf-gate --perf-gate-report=$R/counts-injected/gate.md > $R/counts-injected/terminal.log 2>&1
echo "counts injected exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
pack
python3 s7/gate_input.py s7/table.json s7/null-gate.json $R/det/gate.json
cp s7/table.json $R/det/
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
start=$(date +%s)
PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/s7/table.json \
  PERFGATE_SLOWDOWN_CYCLES=$R/det/cycles.json PERFGATE_SLOWDOWN_LOG=$R/det/injected.jsonl \
  timeout 515 python3 -m perfgate nightly --results $R/det --confirm-only --screen=-100 \
  --base-ref HEAD --blocks 3 --more-blocks 2 -- --device cuda --perf-tier full > $R/det/terminal.log 2>&1
echo "detection exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
pack
