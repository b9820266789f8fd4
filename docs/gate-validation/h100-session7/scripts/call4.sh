# Call 4 (lead, after merging the GEMV kernel for batch 1): the full CUDA tier gated against
# baseline 0005 (a second null stored comparison, on a fresh machine, with launch counts) and
# saved as the new baseline 0006 that holds the batch-1 fused cases on the GEMV kernel.
set -u
R=/tmp/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $R/gpu.txt
python3 -c "import torch, triton, pytest; print(torch.__version__, triton.__version__, pytest.__version__)" >> $R/gpu.txt
git init -q && git add -A && git -c user.name=s7 -c user.email=s7@x commit -qm s7-call4
start=$(date +%s)
timeout 530 python3 -m pytest perf_tests --device cuda --perf-tier full -p no:cacheprovider \
  --perf-gate --perf-gate-report=$R/gate.md --benchmark-json=$R/run.json \
  --benchmark-save=h100-gemv-batch1 > $R/terminal.log 2>&1
echo "full tier exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
cp baselines/NVIDIA-H100-80GB-HBM3/*/0006_* $R/ 2>/dev/null
cp $R/* $OUT/
