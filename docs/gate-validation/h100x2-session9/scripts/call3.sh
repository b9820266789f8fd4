# Session 9, call 3, the two H200s of one host: the night on both GPUs, `perfgate nightly` (the
# stored comparison under -n 2 against baseline 0001_h200-one-gpu, recorded on ONE GPU of the host
# in call 2; then the A/B on both GPUs), with 26 cases slowed ~4 % in B only
# (tools/slowdown_plugin.py gpu-sleep-table, session 7's cycles: cycles3.json) and every other case
# the null. A is HEAD of a throwaway commit of this copy (no slowdown), B the same tree with the
# plugin loaded from conftest.py. --time-limit ends it inside the call; call 4 resumes it.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
S=docs/gate-validation/h100-session7/scripts
R=/tmp/s9; mkdir -p $R/night
T0=$(date +%s)
log() { echo "call 3, $(( $(date +%s) - T0 )) s: $*" | tee -a $R/times.txt; }
trap 'tar czf $OUT/call3.tgz -C $R .' EXIT
export GIT_AUTHOR_DATE=2026-11-25T00:00:00Z GIT_COMMITTER_DATE=2026-11-25T00:00:00Z
git init -q && git add -A -- . ':!.s9' && git -c user.name=s9 -c user.email=s9@x commit -qm s9-night
git rev-parse HEAD > $R/night/head.txt
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
cp $S/cycles3.json $R/night/cycles.json
export PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/$S/table3.json \
  PERFGATE_SLOWDOWN_CYCLES=$R/night/cycles.json PERFGATE_SLOWDOWN_LOG=$R/night/injected.jsonl
LEFT=$(( 560 - ($(date +%s) - T0) ))
timeout $(( LEFT + 25 )) python3 -m perfgate nightly --results $R/night --tests perf_tests \
  --base-ref HEAD --time-limit ${LEFT}s -- --device cuda --perf-tier full > $R/night/terminal.log 2>&1
log "night exit $?"
