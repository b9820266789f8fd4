# The H200 baseline of a commit on main: the full CUDA tier on one GPU of an H200 host, saved
# as this hardware's newest run, so `perfgate nightly` on an H200 host A/Bs against a commit
# every clone has. Stops at once on any other card (it records nothing then).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU 0: $name; commit $(git rev-parse HEAD)"
case "$name" in *H200*) ;; *) echo "not an H200: nothing recorded"; exit 3 ;; esac
git rev-parse HEAD > /dev/null 2>&1 || { echo "no git history here: nothing recorded"; exit 4; }
T0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 timeout 520 python3 -m pytest perf_tests --device cuda --perf-tier full \
  -p no:cacheprovider --perf-store-profiles=never --benchmark-save=h200-main \
  > "$OUT/log.txt" 2>&1
echo "exit $? after $(( $(date +%s) - T0 )) s"
ls baselines/NVIDIA-H200/*/
cp baselines/NVIDIA-H200/*/0002_*.json "$OUT/" 2>/dev/null
tail -4 "$OUT/log.txt"
