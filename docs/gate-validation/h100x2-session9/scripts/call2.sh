# Session 9, call 2, on the two H200s of one host that came for nvidia-h100-x2 (call 1 found no
# H200 baseline, exit 6 at once): (a) CUDA_VISIBLE_DEVICES=1 while another process holds memory on
# GPU 0: the run records GPU 1 and its health; (b) a baseline recorded on ONE GPU of the host
# (CUDA_VISIBLE_DEVICES=0, the full CUDA tier, saved with its launch counts), for the night on
# both GPUs in call 3.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
R=/tmp/s9; mkdir -p $R/id $R/baseline
T0=$(date +%s)
log() { echo "call 2, $(( $(date +%s) - T0 )) s: $*" | tee -a $R/times.txt; }
trap 'tar czf $OUT/call2.tgz -C $R . ; cp baselines/NVIDIA-H200/*/0001_*.json $OUT/ 2>/dev/null' EXIT
python3 -c "import torch, time; x = torch.ones(8 << 30, dtype=torch.uint8, device='cuda:0'); time.sleep(60)" &
HOLD=$!
sleep 10
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv > $R/id/apps.txt
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 -m pytest perf_tests --device cuda --perf-tier full \
  -k "test_dequantize and triton and 1048576" -p no:cacheprovider --perf-store-profiles=never \
  --benchmark-json=$R/id/run.json > $R/id/log.txt 2>&1
log "identity exit $?"
python3 -c "
import json; d = json.load(open('$R/id/run.json'))['machine_info']['perfgate']
print('gpu', d.get('gpu')); print('gpu_health', json.dumps(d.get('gpu_health')))
print('clocks of the first case', d and json.load(open('$R/id/run.json'))['benchmarks'][0]['extra_info'].get('sm_clock_mhz', [])[:5])
" | tee $R/id/summary.txt
kill $HOLD; wait $HOLD 2>/dev/null
CUDA_VISIBLE_DEVICES=0 timeout $(( 585 - ($(date +%s) - T0) )) python3 -m pytest perf_tests --device cuda \
  --perf-tier full -p no:cacheprovider --perf-store-profiles=never --benchmark-save=h200-one-gpu \
  > $R/baseline/log.txt 2>&1
log "baseline exit $?"
