# lanes.sh - run a script's training runs LANES at a time (sourced by tools/make_run.sh, side_by_side.sh
# and translate_compare.sh). The runs' bits do not depend on the thread count, so two one-thread runs side
# by side give the same pictures as one two-thread run after another, in less time on 2 cores: the small
# models of chapters 01-05 keep a second core only half busy.
#
#   LANES=1 (the default): lane NAME LOG CMD... runs CMD in the foreground, its output on the terminal
#                          and copied into LOG.
#   LANES=2:               lane starts CMD in the background as soon as fewer than 2 runs are going, its
#                          output into LOG only; when it ends, LOG is printed whole (so two runs' lines never
#                          mix) with the seconds it took. lanes_wait waits for every run started; a failed run
#                          stops the script (after the others end) naming its log.
# A run's times (train_seconds in results.json) are then measured beside another run: make run's quick
# defaults report them, timing pictures are never drawn that way (tools/make_run.sh runs chapter 05, which
# times attention, alone).
LANES=${LANES:-1}
case "$LANES" in
  1|2|3|4|5|6|7|8|9|1[0-6]) ;;
  *) echo "lanes.sh: LANES=$LANES: expected a whole number of runs at a time from 1 to 16" >&2; exit 2 ;;
esac
LANES_PIDS=()     # the runs going now
LANES_FAILED=""   # the logs of the runs that failed

lanes_since() {   # T0: the seconds since T0 (date +%s.%N), to a tenth
  awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

lanes_one() {     # NAME LOG CMD...: one run, its output into LOG; prints LOG and its time at the end
  local name=$1 log=$2; shift 2
  local t0 rc=0; t0=$(date +%s.%N)
  "$@" > "$log" 2>&1 || rc=$?
  {
    echo "=== $name: $*"
    cat "$log"
    echo "=== $name: $(lanes_since "$t0") s$( [ "$rc" = 0 ] || echo ", FAILED (exit $rc)")"
  } | flock "$LANES_LOCK" cat
  return "$rc"
}

lanes_reap() {    # wait for one run to end; remember it if it failed
  local pid alive=()
  wait -n "${LANES_PIDS[@]}" 2> /dev/null || true
  for pid in "${LANES_PIDS[@]}"; do
    if kill -0 "$pid" 2> /dev/null; then alive+=("$pid")
    elif ! wait "$pid"; then LANES_FAILED="$LANES_FAILED ${LANES_LOG[$pid]}"
    fi
  done
  LANES_PIDS=("${alive[@]}")
}

declare -A LANES_LOG
LANES_LOCK=$(mktemp)   # held while a finished run's output is printed
trap 'rm -f "$LANES_LOCK"' EXIT   # (the sourcing scripts set no EXIT trap of their own)

lane() {          # NAME LOG CMD...: run CMD (see the header); LOG's folder is made
  local name=$1 log=$2; shift 2
  mkdir -p "$(dirname "$log")"
  if [ "$LANES" = 1 ]; then
    echo "=== $name: $*"
    local t0; t0=$(date +%s.%N)
    "$@" 2>&1 | tee "$log" || { echo "$name failed; its output is in $log" >&2; exit 1; }
    echo "=== $name: $(lanes_since "$t0") s"
    return 0
  fi
  while [ "${#LANES_PIDS[@]}" -ge "$LANES" ]; do lanes_reap; done
  echo "=== $name: started ($(( ${#LANES_PIDS[@]} + 1 )) of $LANES lanes busy)"
  lanes_one "$name" "$log" "$@" &
  LANES_PIDS+=("$!")
  LANES_LOG[$!]=$log
}

lanes_wait() {    # wait for every run started by lane; exit 1 naming the logs of any that failed
  while [ "${#LANES_PIDS[@]}" -gt 0 ]; do lanes_reap; done
  if [ -n "$LANES_FAILED" ]; then
    echo "lanes: these runs failed; their output is in:$LANES_FAILED" >&2
    exit 1
  fi
}
