# Session 9, call 1, two H100s of one host (run from the copy's root; $OUT comes back):
# (a) CUDA_VISIBLE_DEVICES=1 while another process holds memory on GPU 0: a gated session on the
#     second card; which GPU it read, trusted or not;
# (b) the night on both GPUs: `perfgate nightly` (stored comparison under -n 2 against the
#     one-GPU H100 baseline 0006, then the A/B on both GPUs) with 26 cases slowed ~4 % in B only
#     (tools/slowdown_plugin.py gpu-sleep-table, the cycles of session 7: cycles3.json) and every
#     other case the null; A is HEAD of a throwaway commit of this copy (no slowdown), B the same
#     tree with the plugin loaded from conftest.py. --time-limit ends it inside the call; call 2
#     resumes it (--resume) on a fresh machine from what this call brought back.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
S=docs/gate-validation/h100-session7/scripts
R=/tmp/s9; mkdir -p $R/id $R/night
T0=$(date +%s)
log() { echo "$(( $(date +%s) - T0 )) s: $*" | tee -a $R/times.txt; }
trap 'tar czf $OUT/call1.tgz -C $R .' EXIT
{ nvidia-smi -L; nvidia-smi --query-gpu=index,uuid,name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
  python3 -c "import torch; print(torch.__version__, [('GPU-' + str(torch.cuda.get_device_properties(i).uuid), torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())])"
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|pytest|pytest-benchmark|pytest-xdist|nvidia-ml-py|tqdm|numpy|scipy) "; } > $R/gpus.txt 2>&1
log "start"
# (a) the second card while the first is busy
python3 -c "import torch, time; x = torch.ones(8 << 30, dtype=torch.uint8, device='cuda:0'); time.sleep(110)" &
HOLD=$!
sleep 10
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv > $R/id/apps.txt
CUDA_VISIBLE_DEVICES=1 timeout 100 python3 -m pytest perf_tests --device cuda --perf-tier full \
  -k "test_dequantize and triton and 1048576" -p no:cacheprovider --perf-gate \
  --perf-gate-report=$R/id/gate.md --benchmark-json=$R/id/run.json > $R/id/log.txt 2>&1
log "identity exit $?"
kill $HOLD; wait $HOLD 2>/dev/null
# (b) the injected night on both GPUs
export GIT_AUTHOR_DATE=2026-11-25T00:00:00Z GIT_COMMITTER_DATE=2026-11-25T00:00:00Z
git init -q && git add -A && git -c user.name=s9 -c user.email=s9@x commit -qm s9-night
git rev-parse HEAD > $R/night/head.txt
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
cp $S/cycles3.json $R/night/cycles.json
export PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/$S/table3.json \
  PERFGATE_SLOWDOWN_CYCLES=$R/night/cycles.json PERFGATE_SLOWDOWN_LOG=$R/night/injected.jsonl
LEFT=$(( 560 - ($(date +%s) - T0) ))
timeout $(( LEFT + 25 )) python3 -m perfgate nightly --results $R/night --tests perf_tests \
  --base-ref HEAD --time-limit ${LEFT}s -- --device cuda --perf-tier full > $R/night/terminal.log 2>&1
log "night exit $?"
