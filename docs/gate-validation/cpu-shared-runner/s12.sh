#!/usr/bin/env bash
# Session 12: kornia's instruction sessions again with the wheel of main (session 11 ran 4 of the
# 10 unchanged sessions issue 30 asks): a baseline, then unchanged gated sessions until
# UNTIL_EPOCH, one counting process each and the same cases, load and options as s11.sh. Run
# again, it goes on where it stopped (a session with an exit status is not run again).
#   s12.sh N UNTIL_EPOCH
set -u
cd /tmp/val2 || exit 1
n=$1 until=$2
export KORNIA_TEST_IN_SUBPROCESS=1  # kornia's conftest then skips its torch.compile warm-up
extra=(--perf-callgrind-layouts=1 --perf-callgrind-env KORNIA_TEST_IN_SUBPROCESS)
[ -e runs/kornia/s12-base/rc ] || tools/isession.sh kornia s12-base "${extra[@]}" --benchmark-save=s12base
for i in $(seq -w 1 "$n"); do
  [ -e "runs/kornia/s12-null-$i/rc" ] && continue
  [ "$(date +%s)" -lt "$until" ] || break
  tools/isession.sh kornia "s12-null-$i" --perf-gate "${extra[@]}"
done
