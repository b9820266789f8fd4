# Call 1: the full tier as the nightly's stored comparison against 0004, saved as the new baseline
# 0005 (with launch counts); then the host-bound cases against 0005 (null), and again with an
# extra kernel per call (tools/slowdown_plugin.py gpu-sleep-4): the count gate must catch it.
set -u
R=/tmp/r; mkdir -p $R/null $R/counts-null $R/counts-injected
pack() { tar czf $OUT/call1.tgz -C $R . ; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $R/gpu.txt
python3 -c "import torch, triton, pytest; print(torch.__version__, triton.__version__, pytest.__version__)" >> $R/gpu.txt
git init -q && git add -A && git -c user.name=s7 -c user.email=s7@x commit -qm s7-null
start=$(date +%s)
timeout 440 python3 -m pytest perf_tests --device cuda --perf-tier full -p no:cacheprovider \
  --perf-gate --perf-gate-report=$R/null/gate.md --benchmark-json=$R/null/nightly.json \
  --junitxml=$R/null/junit.xml --benchmark-save=h100-launch-counts > $R/null/terminal.log 2>&1
echo "full tier exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
cp baselines/NVIDIA-H100-80GB-HBM3/*/0005_* $R/ ; pack
K="test_resnet18_steady or test_encoder"
for side in null injected; do
  start=$(date +%s)
  extra=""; [ $side = injected ] && extra="-p tools.slowdown_plugin"
  PERFGATE_SLOWDOWN=$([ $side = injected ] && echo gpu-sleep-4) timeout 70 python3 -m pytest perf_tests \
    --device cuda --perf-tier full -p no:cacheprovider $extra -k "$K" --perf-gate \
    --perf-gate-report=$R/counts-$side/gate.md > $R/counts-$side/terminal.log 2>&1
  echo "counts $side exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
  pack
done
