#!/usr/bin/env bash
# run.sh - replay and run every libFuzzer target of BUILD/fuzz (make fuzz).
#
#   bash tests/fuzz/run.sh BUILD SECONDS [TARGET ...]
#
# For each target fuzz_NAME (all of them, or the TARGETs named):
#   1. replay tests/fuzz/NAME/ (the seed files and the regression inputs of
#      bugs found before) once: every file must pass;
#   2. fuzz it SECONDS seconds (0: replay only), starting from that corpus;
#      new interesting inputs go to BUILD/fuzz-corpus/NAME/ (not committed),
#      a crash, leak, timeout or out-of-memory input to BUILD/fuzz-findings/NAME/.
# Prints one line per target (executions, findings) and exits non-zero when
# any target found something. FUZZ_FLAGS adds libFuzzer flags (e.g. -runs=N:
# then each process stops after N executions); FUZZ_JOBS=J runs J processes
# per target on the same corpus (they share what they find through it) and
# adds up their executions.
set -u
build=${1:?usage: run.sh BUILD SECONDS [TARGET ...]}
seconds=${2:-60}
shift 2
names=("$@")
if [ "${#names[@]}" -eq 0 ]; then
  for bin in "$build"/fuzz/fuzz_*; do [ -x "$bin" ] && names+=("$(basename "$bin" | sed 's/^fuzz_//')"); done
fi
[ "${#names[@]}" -gt 0 ] || { echo "run.sh: no fuzz targets in $build/fuzz" >&2; exit 2; }

# -timeout: one input running 10 s is a finding; -rss_limit_mb: so is 2 GB.
common=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
# the targets' scratch files (tests/fuzz/fuzz_util.h), in memory when /dev/shm exists
if [ -d /dev/shm ] && [ -w /dev/shm ]; then FUZZ_SCRATCH=$(mktemp -d /dev/shm/attn-fuzz.XXXXXX)
else FUZZ_SCRATCH=$(mktemp -d); fi
export FUZZ_SCRATCH
trap 'rm -rf "$FUZZ_SCRATCH"' EXIT
total_findings=0
printf '%-12s %14s %10s %9s  %s\n' target executions "exec/s" findings "corpus"
for name in "${names[@]}"; do
  bin=$build/fuzz/fuzz_$name
  seeds=tests/fuzz/$name
  work=$build/fuzz-corpus/$name
  findings=$build/fuzz-findings/$name
  mkdir -p "$work" "$findings"
  log=$(mktemp)
  found=0
  # 1. the committed corpus, each input once
  if ! "$bin" "${common[@]}" -runs=0 "$seeds" >"$log" 2>&1; then
    echo "=== fuzz_$name: an input of $seeds fails:"; tail -n 40 "$log"; found=1
  fi
  replayed=$(ls "$seeds" 2>/dev/null | wc -l)
  execs=0 rate=0
  # 2. fuzzing
  if [ "$found" -eq 0 ] && [ "$seconds" -gt 0 ]; then
    pids=()
    for j in $(seq 1 "${FUZZ_JOBS:-1}"); do
      # Each process on a CPU of its own: a process whose threads (libFuzzer's
      # RSS watcher, OpenMP's) ran on both CPUs pays an inter-processor
      # interrupt to flush the other CPU's TLB at every munmap, and such a
      # call costs tens of microseconds in this kind of virtual machine.
      # No pinning when taskset is missing or that CPU is not ours (a container's cpuset).
      pin=()
      cpu=$(((j - 1) % $(nproc)))
      if command -v taskset >/dev/null && taskset -c "$cpu" true 2>/dev/null; then pin=(taskset -c "$cpu"); fi
      "${pin[@]}" "$bin" "${common[@]}" -max_total_time="$seconds" -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} \
        "$work" "$seeds" >"$log.$j" 2>&1 &
      pids+=($!)
    done
    for j in $(seq 1 "${FUZZ_JOBS:-1}"); do
      if ! wait "${pids[$((j - 1))]}"; then
        echo "=== fuzz_$name found something (inputs in $findings/):"; grep -v '^#' "$log.$j" | tail -n 60; found=1
      fi
    done
    execs=$(cat "$log".* | awk '/stat::number_of_executed_units/ {n += $2} END {print n + 0}')
    rate=$(cat "$log".* | awk '/stat::average_exec_per_sec/ {n += $2} END {print n + 0}')
    rm -f "$log".*
  fi
  rm -f "$log"
  total_findings=$((total_findings + found))
  printf '%-12s %14s %10s %9d  %d seed/regression files replayed\n' "$name" "${execs:-0}" "${rate:-0}" "$found" "$replayed"
done
echo "fuzz: $total_findings finding(s)"
[ "$total_findings" -eq 0 ]
