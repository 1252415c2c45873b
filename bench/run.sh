#!/usr/bin/env bash
# run.sh - run every benchmark and render its plots (called by `make bench`).
#
#   bash bench/run.sh [BUILD]      BUILD defaults to build
#
# Runs BUILD/bench/bench_sgemm first, then any other BUILD/bench/bench_*
# binaries; results go to bench/results/. Benchmarks print figures and ratios,
# they never pass or fail, so a benchmark that errors is reported and skipped.
# gnuplot renders bench/results/*.gp to PNG when it is installed.
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 1
results=bench/results
mkdir -p "$results"

if [ ! -x "$build/bench/bench_sgemm" ]; then
  echo "run.sh: $build/bench/bench_sgemm not found: run 'make bench' (or make $build/bench/bench_sgemm BENCH_LIBS=-lopenblas)" >&2
  exit 1
fi

load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
echo "bench: load average $load (figures are only meaningful on an otherwise idle machine)"

run() {  # run one benchmark binary, keep going on failure
  echo
  echo "=== $1"
  "$@" || echo "run.sh: $1 exited with status $? (skipped)" >&2
}

run "$build/bench/bench_sgemm" --out "$results"
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  [ "$(basename "$b")" = bench_sgemm ] && continue
  run "$b"
done

if command -v gnuplot >/dev/null 2>&1; then
  for gp in "$results"/*.gp; do
    [ -f "$gp" ] || continue
    if (cd "$results" && gnuplot "$(basename "$gp")"); then
      echo "plot: ${gp%.gp}.png"
    else
      echo "run.sh: gnuplot failed on $gp" >&2
    fi
  done
else
  echo "note: gnuplot not installed, PNGs skipped (apt-get install gnuplot-nox); data and .gp scripts are in $results/"
fi
