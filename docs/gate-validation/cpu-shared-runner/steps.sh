# Sourced by the timed-session scripts (s11-time.sh, s11-time2.sh, s12-time.sh, s12-ktime.sh), with S set to
# the session command (tsession.sh PROJECT): `nulls LABEL UNTIL_EPOCH [ARG ...]` runs unchanged
# gated sessions LABEL-01 to LABEL-10, `$S LABEL-NN --perf-gate ARG ...`, until UNTIL_EPOCH.
nulls() {
  local label=$1 until=$2 i
  shift 2
  for i in $(seq -w 1 10); do
    [ "$(date +%s)" -lt "$until" ] || break
    $S "$label-$i" --perf-gate "$@"
  done
}
