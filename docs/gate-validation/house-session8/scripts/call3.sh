# Call 3 (session 8): `perfgate ab` of the rebuilt house (issue 19) against the code baseline 0006
# ran (d7ebdcf), on the cases of call 2's one confirmed regression's shape
# (test_linear[cuda-14336x4096-16-*]). Runs from inside .gpu9, a git repository of two commits:
# HEAD~1 = d7ebdcf (A), HEAD = the rebuilt house (B): cd .gpu9 && bash call3.sh
# 14336x4096 is a full-tier shape only, so every block runs with --perf-tier full.
# No PYTHONPATH: `python3 -m perfgate` runs this tree's perfgate from the current folder, and ab
# puts each tree first on PYTHONPATH for its own blocks.
set -u
unset PYTHONPATH
R=/tmp/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $R/gpu.txt
nvidia-smi -q -d PERFORMANCE >> $R/gpu.txt 2>&1
python3 -c "import torch, triton, pytest, pytest_benchmark; print(torch.__version__, torch.version.cuda, triton.__version__, pytest.__version__, pytest_benchmark.__version__)" >> $R/gpu.txt 2>&1
git log --oneline -2 >> $R/gpu.txt
K="test_linear and 14336x4096-16"
ARGS="--device cuda --perf-tier full"
{ echo "== B (HEAD) =="; PYTHONPATH=$PWD python3 -m pytest perf_tests -q -p no:cacheprovider --collect-only -k "$K" $ARGS 2>&1
  git worktree add -q --detach /tmp/a HEAD~1 >/dev/null 2>&1
  echo "== A (HEAD~1) =="; (cd /tmp/a && PYTHONPATH=/tmp/a python3 -m pytest perf_tests -q -p no:cacheprovider --collect-only -k "$K" $ARGS 2>&1)
  git worktree remove --force /tmp/a; git worktree prune; } > $R/collected.txt
start=$(date +%s)
timeout 520 python3 -m perfgate ab HEAD~1 -k "$K" --blocks 5 --out $R/ab.json -- $ARGS > $R/terminal.log 2>&1
echo "ab exit $? in $(( $(date +%s) - start )) s" >> $R/times.txt
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $R/times.txt
ls -la $R >> $R/times.txt
cp -r $R/* $OUT/
