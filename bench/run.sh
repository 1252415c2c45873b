#!/usr/bin/env bash
# run.sh - run every benchmark and render its plots (called by `make bench`).
#
#   bash bench/run.sh [BUILD]      BUILD defaults to build
#
# Runs BUILD/bench/bench_sgemm first, then BUILD/bench/bench_train_step and
# its PyTorch twin tools/bench_torch.py (when /usr/bin/python3 can import
# torch) in ROUNDS alternating rounds (default 3), prints the train-step ratios (avx2 against naive, our best against
# PyTorch's best thread count), bench_train_step --busy (1 and 2 threads
# beside a process spinning on the CPU), then BUILD/bench/bench_transformer (chapter 06's
# training step at D = 256, 4 + 4 layers against the FMA peak), then BUILD/bench/bench_flash
# (plain against fused attention), then BUILD/bench/bench_generate (chapter 06's GPT
# generating with and without its KV cache), then any other BUILD/bench/bench_* binaries;
# results go to bench/results/. tools/bench_tables.py rewrites bench/README.md's
# tables from them (tools/perf_table.sh prints them). Benchmarks print figures and ratios,
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

# The machine, beside every table: figures from two machines must never be
# mixed up. The cache sizes are the ones the kernels' blocking is derived from
# (glibc's sysconf, from CPUID; common/kernels/matmul_blocked.c).
cache() { v=$(getconf "$1" 2>/dev/null); [ -n "$v" ] && [ "$v" -gt 0 ] 2>/dev/null && echo "$((v / 1024)) KiB" || echo "?"; }
cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
isa=AVX2; case "$flags" in *avx512f*) isa=AVX-512 ;; esac
machine="${cpu:-unknown CPU}, $(nproc) cores, widest SIMD $isa; per core L1d $(cache LEVEL1_DCACHE_SIZE), L2 $(cache LEVEL2_CACHE_SIZE); L3 $(cache LEVEL3_CACHE_SIZE); $(${CC:-cc} --version 2>/dev/null | head -n 1)"
echo "bench: machine: $machine"
echo "$machine" >"$results/machine.txt"

run() {  # run one benchmark binary, keep going on failure
  echo
  echo "=== $*"
  "$@" || echo "run.sh: $1 exited with status $? (skipped)" >&2
}

# OpenBLAS "as installed" picks its kernels for this CPU at load time, unless
# OPENBLAS_CORETYPE says otherwise: some machines set it (and OPENBLAS_L2_SIZE)
# for old OpenBLAS builds that misdetect new CPUs. For this comparison both are
# unset, so OpenBLAS runs the kernels it would pick itself (bench_sgemm prints
# which: on an AVX-512 CPU, AVX-512 ones); its AVX2 kernels are measured by a
# second process with OPENBLAS_CORETYPE=Haswell (see bench/bench_sgemm.c).
run env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/bench/bench_sgemm" --out "$results"

# Training steps: C (naive, avx2, avx512; naive, neon on ARM) then PyTorch, each at every
# thread count of THREADS (default 1,2,0: 1, 2 and all cores; for C, 0 is the default
# where each region takes the threads its work pays for), in ROUNDS rounds that
# take turns (C, PyTorch, C, PyTorch, ...): the two run in different processes,
# and this virtual machine's clock drifts by tens of percent over minutes, so
# one run of each could compare a fast spell with a slow one. Each round's
# figure is a median of 7 steps; train_step.tsv gets the median over rounds.
rounds=${ROUNDS:-3}
threads=${THREADS:-1,2,0}
if [ -x "$build/bench/bench_train_step" ]; then
  have_torch=0
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then have_torch=1; fi
  round_dirs=()
  for r in $(seq 1 "$rounds"); do
    dir=$(mktemp -d)
    round_dirs+=("$dir")
    run "$build/bench/bench_train_step" --out "$dir" --threads "$threads"
    echo
    echo "=== tools/bench_torch.py (round $r of $rounds)"
    if [ "$have_torch" = 1 ]; then
      # the same fair OpenBLAS as bench_sgemm's (above); bench_torch.py unsets them too
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tools/bench_torch.py --results "$dir" \
        --threads "$threads" ||
        echo "run.sh: tools/bench_torch.py failed (skipped)" >&2
    else
      echo "note: /usr/bin/python3 cannot import torch: the PyTorch comparison is skipped (make deps-twin)"
    fi
  done
  cp "${round_dirs[0]}/train_step_batches.txt" "$results/"
  [ -f "${round_dirs[0]}/torch_config.txt" ] && cp "${round_dirs[0]}/torch_config.txt" "$results/"
  # The median over rounds of each (chapter, impl, threads) figure.
  awk -F'\t' '
    FNR == 1 { next }
    {
      key = $1 "\t" $2 "\t" $3
      if (!(key in n)) order[++keys] = key
      v[key, ++n[key]] = $4
    }
    END {
      print "chapter\timpl\tthreads\tms"
      for (k = 1; k <= keys; k++) {
        key = order[k]; m = n[key]
        for (i = 1; i <= m; i++) s[i] = v[key, i]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
        med = (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
        printf "%s\t%.3f\n", key, med
      }
    }' "${round_dirs[@]/%//train_step.tsv}" >"$results/train_step.tsv"
  rm -rf "${round_dirs[@]}"
  echo
  echo "=== train step, medians over $rounds rounds, and ratios (from $results/train_step.tsv; > 1x means ours is faster)"
  awk -F'\t' '
    NR == 1 { next }
    {
      key = $1 SUBSEP $2 SUBSEP $3; ms[key] = $4
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      if ($2 == "torch" && (best[$1] == "" || $4 < best[$1])) { best[$1] = $4; best_t[$1] = $3 }  # any thread count
      if ($2 != "torch" && $2 != "naive" && (ours[$1] == "" || $4 < ours[$1])) {
        ours[$1] = $4; ours_how[$1] = $2 " " ($3 == 0 ? "all" : $3 "t")
      }
    }
    END {
      printf "%-26s %10s %10s %11s %12s %18s %14s %12s\n", "chapter", "naive 1t", "avx2 1t", "naive/avx2",
             "avx512 1t", "ours best", "torch best", "torch/ours"
      for (i = 1; i <= n; i++) {
        ch = order[i]
        a1 = ms[ch SUBSEP "avx2" SUBSEP 1]; n1 = ms[ch SUBSEP "naive" SUBSEP 1]
        a512 = ((ch SUBSEP "avx512" SUBSEP 1) in ms) ? sprintf("%.2f", ms[ch SUBSEP "avx512" SUBSEP 1]) : "-"
        speed = (a1 > 0 && n1 > 0) ? sprintf("%.1fx", n1 / a1) : "-"
        tb = (ch in best) ? sprintf("%.2f (%dt)", best[ch], best_t[ch]) : "-"
        vs = (ch in best && ours[ch] > 0) ? sprintf("%.2fx", best[ch] / ours[ch]) : "-"
        printf "%-26s %10.2f %10.2f %11s %12s %18s %14s %12s\n", ch, n1, a1, speed, a512,
               sprintf("%.2f (%s)", ours[ch], ours_how[ch]), tb, vs
      }
      print "ms per training step. naive/avx2: speed-up of the AVX2 backend on 1 thread;"
      print "torch/ours: PyTorch at its best thread count against our best backend and thread count"
      print "(> 1x: ours is faster)."
    }' "$results/train_step.tsv"
  # Two threads beside another busy program: train_step_busy.tsv.
  run "$build/bench/bench_train_step" --out "$results" --busy
fi

# Chapter 06's training step at D = 256, 4 + 4 layers: GFLOP/s, fraction of the FMA peak and
# where the time goes (transformer_peak.tsv).
if [ -x "$build/bench/bench_transformer" ]; then
  run "$build/bench/bench_transformer" --out "$results"
fi

# Plain against fused (FlashAttention-style) attention, N = 256 .. 8192: flash.tsv, flash.gp.
if [ -x "$build/bench/bench_flash" ]; then
  run "$build/bench/bench_flash" --out "$results"
fi

# Chapter 06's GPT generating up to a context of 512, with and without the KV cache:
# generate.tsv, generate.gp (tokens/s against the context); then the same model's
# PyTorch KV-cache loop (tools/bench_torch_generate.py, generate_torch.tsv). The two
# take turns for ROUNDS rounds, one thread each; each file gets the median over rounds.
if [ -x "$build/bench/bench_generate" ]; then
  gen_dirs=()
  for r in $(seq 1 "$rounds"); do
    dir=$(mktemp -d)
    gen_dirs+=("$dir")
    run "$build/bench/bench_generate" --out "$dir" --reps 3
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
      echo
      echo "=== tools/bench_torch_generate.py (round $r of $rounds)"
      # PyTorch as in bench_torch.py: its own OpenBLAS kernels, malloc keeping freed memory
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824 \
        /usr/bin/python3 tools/bench_torch_generate.py --results "$dir" --reps 3 ||
        echo "run.sh: tools/bench_torch_generate.py failed (skipped)" >&2
    fi
  done
  cp "${gen_dirs[0]}"/generate.gp "${gen_dirs[0]}"/generate.dat "$results/" 2>/dev/null
  /usr/bin/python3 - "$results" "${gen_dirs[@]}" <<'PY'
import os, statistics, sys
out, dirs = sys.argv[1], sys.argv[2:]
for name in ("generate.tsv", "generate_torch.tsv"):
    rows = {}
    for d in dirs:
        path = os.path.join(d, name)
        if not os.path.exists(path):
            continue
        for line in open(path).read().splitlines()[1:]:
            mode, n, ms, _ = line.split("\t")
            rows.setdefault((mode, int(n)), []).append(float(ms))
    if rows:
        with open(os.path.join(out, name), "w") as f:
            f.write("mode\tn\tms\ttokens_per_s\n")
            for (mode, n), v in rows.items():
                ms = statistics.median(v)
                f.write(f"{mode}\t{n}\t{ms:.3f}\t{n / (ms * 1e-3):.1f}\n")
PY
  rm -rf "${gen_dirs[@]}"
  echo
  echo "=== generation, medians over $rounds rounds"
  /usr/bin/python3 tools/bench_tables.py --results "$results" --print generate
fi

for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  case "$(basename "$b")" in bench_sgemm | bench_train_step | bench_transformer | bench_flash | bench_generate) continue ;; esac
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
