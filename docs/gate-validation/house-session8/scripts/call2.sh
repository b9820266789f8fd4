# Call 2 (session 8): the rebuilt house (issue 19), a null run: the full CUDA tier gated against
# the newest H100 baseline (0006_h100-gemv-batch1), nothing saved. Runs from inside .gpu8
# (a snapshot of main at the commit in COMMIT): cd .gpu8 && bash call2.sh
set -u
export PYTHONPATH=$PWD
R=/tmp/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $R/gpu.txt
python3 -c "import torch, triton, pytest; print(torch.__version__, triton.__version__, pytest.__version__)" >> $R/gpu.txt
git init -q && git add -A && git -c user.name=s8 -c user.email=s8@x commit -qm s8-call2
start=$(date +%s)
timeout 540 python3 -m pytest perf_tests --device cuda --perf-tier full -p no:cacheprovider \
  --perf-gate --perf-gate-report=$R/gate.md --benchmark-json=$R/run.json > $R/terminal.log 2>&1
echo "full tier exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
ls -la $R >> $R/times.txt
cp -r $R/* $OUT/
