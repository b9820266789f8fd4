# Session 9, call 2, two H100s of one host: the injected night of call 1 resumed (--resume) from
# what call 1 brought back (carried in .s9/call1.tgz), on a fresh machine: the same throwaway
# commit (same tree, same dates: the same A), the same slowdown in B, the same cycles.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
S=docs/gate-validation/h100-session7/scripts
R=/tmp/s9; mkdir -p $R
tar xzf .s9/call1.tgz -C $R
T0=$(date +%s)
log() { echo "call 2, $(( $(date +%s) - T0 )) s: $*" | tee -a $R/times.txt; }
trap 'tar czf $OUT/call2.tgz -C $R .' EXIT
export GIT_AUTHOR_DATE=2026-11-25T00:00:00Z GIT_COMMITTER_DATE=2026-11-25T00:00:00Z
git init -q && git add -A -- . ':!.s9' && git -c user.name=s9 -c user.email=s9@x commit -qm s9-night
[ "$(git rev-parse HEAD)" = "$(cat $R/night/head.txt)" ] || log "A differs from call 1's: $(git rev-parse HEAD)"
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
export PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/$S/table3.json \
  PERFGATE_SLOWDOWN_CYCLES=$R/night/cycles.json PERFGATE_SLOWDOWN_LOG=$R/night/injected.jsonl
LEFT=$(( 560 - ($(date +%s) - T0) ))
timeout $(( LEFT + 25 )) python3 -m perfgate nightly --results $R/night --tests perf_tests \
  --base-ref HEAD --resume --time-limit ${LEFT}s -- --device cuda --perf-tier full > $R/night/terminal2.log 2>&1
log "night resumed exit $?"
