# Session 9, call 4, the two H200s: the night of call 3 resumed (--resume) from what call 3 brought
# back (carried in .s9/call3.tgz), on a fresh machine: the same throwaway commit (same tree, same
# dates: the same A), the same slowdown in B, the same cycles.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
S=docs/gate-validation/h100-session7/scripts
R=/tmp/s9; mkdir -p $R
tar xzf .s9/call3.tgz -C $R && rm -rf .s9  # the tree as call 3 saw it (run from a copy of this
# script outside the tree: cp it to /tmp and delete it here first), so the A/B's journal is this tree's
T0=$(date +%s)
log() { echo "call 4, $(( $(date +%s) - T0 )) s: $*" | tee -a $R/times.txt; }
trap 'tar czf $OUT/call4.tgz -C $R .' EXIT
export GIT_AUTHOR_DATE=2026-11-25T00:00:00Z GIT_COMMITTER_DATE=2026-11-25T00:00:00Z
git init -q && git add -A -- . ':!.s9' ':!docs/gate-validation/h100x2-session9/scripts/call4.sh' && git -c user.name=s9 -c user.email=s9@x commit -qm s9-night
[ "$(git rev-parse HEAD)" = "$(cat $R/night/head.txt)" ] || log "A differs from call 3's: $(git rev-parse HEAD)"
echo 'pytest_plugins = ("perfgate.plugin", "perf_tests.suite", "pytester", "tools.slowdown_plugin")' >> conftest.py
export PERFGATE_SLOWDOWN=gpu-sleep-table PERFGATE_SLOWDOWN_TABLE=$PWD/$S/table3.json \
  PERFGATE_SLOWDOWN_CYCLES=$R/night/cycles.json PERFGATE_SLOWDOWN_LOG=$R/night/injected.jsonl
LEFT=$(( 540 - ($(date +%s) - T0) ))
timeout $(( LEFT + 25 )) python3 -m perfgate nightly --results $R/night --tests perf_tests \
  --base-ref HEAD --resume --time-limit ${LEFT}s -- --device cuda --perf-tier full > $R/night/terminal4.log 2>&1
log "night resumed exit $?"
