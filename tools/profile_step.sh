#!/usr/bin/env bash
# profile_step.sh - where the time of one chapter's training step goes.
#
#   bash tools/profile_step.sh CHAPTER BACKEND THREADS [REPS]
#   e.g. bash tools/profile_step.sh 04 avx512 2
#   bash tools/profile_step.sh all BACKEND THREADS [REPS]    the table: a header, a row per chapter
#
# Runs build/bench/bench_train_step (make bench builds it) on one
# configuration (--chapters CHAPTER --backends BACKEND --threads THREADS,
# REPS timed steps, default 60) under `perf record` (Debian's linux-perf:
# sampling at 4 kHz, which works in a virtual machine without hardware
# counters), with the events switched on only during the timed steps
# (perf's --control FIFOs, see perf_control in bench/bench_train_step.c).
# The main thread's samples make the table: its time line is the step's wall
# time, and it takes part in every parallel region. They are sorted by the
# function they landed in:
#
#   gemm kernel   the micro-kernels and the small-product path (the FMAs)
#   gemm packing  copying A and B into the kernels' order
#   gemm other    the blocked driver around them
#   softmax, layernorm (and RMSNorm), element-wise (exp, tanh, sigmoid, GELU),
#   optimizer     Adam, the gradient-norm clip, the finite check
#   threads       OpenMP's runtime (libgomp): waiting at joins, waking threads
#   memory        memset/memcpy/memmove of libc (zeroing and copying buffers)
#   libm          scalar exp, log, tanh, ... of libm
#   OS            the kernel, for the program (page faults, futex, timers)
#   rest          everything else: the chapters' own loops (embeddings, the
#                 loss, RNN cells' gates, attention's masks, ...)
#
# Prints one Markdown row: the chapter, the configuration, the step's median
# time, the GFLOP of its matrix products (2 x sgemm's counted multiply-adds)
# and their speed (GFLOP over the step's time spent in the three GEMM parts),
# each part's share in percent (adding up to 100 up to rounding),
# and with 2 threads how busy the second thread was: its samples outside
# libgomp (working, not spinning while it waits for the next parallel
# region) per main-thread sample of the step, in percent (100: both threads
# worked all the time). PROFILE_TOP=N also prints the N functions with most
# samples.
# A missing perf is reported and the script exits 1.
set -u
chapter=${1:?usage: profile_step.sh CHAPTER|all BACKEND THREADS [REPS]}
backend=${2:?backend (naive, avx2, avx512, neon)}
threads=${3:?threads (1 or 2)}
reps=${4:-60}
cd "$(dirname "$0")/.." || exit 1
command -v perf >/dev/null 2>&1 || { echo "profile_step.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
bin=build/bench/bench_train_step
[ -x "$bin" ] || { echo "profile_step.sh: $bin not found: run 'make bench' first" >&2; exit 1; }
if [ "$chapter" = all ]; then
  echo "| chapter | config | step ms | GEMM GFLOP per step | GEMM GFLOP/s | gemm kernel % | gemm packing % | gemm other % | softmax % | layernorm % | element-wise % | optimizer % | threads % | memory % | libm % | OS % | rest % | 2nd thread busy % |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for c in 01 02 03 04 05 06_transformer 06_gpt 06_gpt_nanogpt_cpu 07; do
    bash "$0" "$c" "$backend" "$threads" "$reps" || exit 1
  done
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkfifo "$work/ctl" "$work/ack"
if ! ATTN_PERF_CTL="$work/ctl" ATTN_PERF_ACK="$work/ack" perf record -q -F 4000 -D -1 \
      --control "fifo:$work/ctl,$work/ack" -o "$work/perf.data" "$bin" --out "$work" --reps "$reps" \
      --chapters "$chapter" --backends "$backend" --threads "$threads" >"$work/out.txt" 2>&1; then
  echo "profile_step.sh: perf record failed:" >&2; tail -n 5 "$work/out.txt" >&2; exit 1
fi
# The step's median time (train_step.tsv) and its products' multiply-adds (the
# bench's "gemm:" line): with the GEMM share of the samples, the products' speed.
ms=$(awk -F'\t' -v b="$backend" -v t="$threads" '$2 == b && $3 == t { print $4 }' "$work/train_step.tsv")
macs=$(sed -n 's/.*gemm: \([0-9.]*\) million multiply-adds per step.*/\1/p' "$work/out.txt" | head -n 1)
perf script -i "$work/perf.data" -F pid,tid,ip,sym,dso 2>/dev/null |
  awk -v chapter="$chapter" -v config="$backend ${threads}t" -v top="${PROFILE_TOP:-0}" \
      -v ms="${ms:-0}" -v macs="${macs:-0}" '
    function classify(sym, dso) {
      if (dso ~ /kernel/) return "os"
      if (dso ~ /libgomp/) return "threads"
      if (sym ~ /^(__)?mem(set|cpy|move)/) return "memory"
      if (dso ~ /libm[.-]/) return "libm"
      if (sym ~ /^kernel_[0-9]+x[0-9]+|^sgemm_small/) return "kernel"
      if (sym ~ /^pack_/) return "packing"
      if (sym ~ /blocked|^sgemm|tile_store|ragged/) return "gemm_other"
      if (sym ~ /softmax/) return "softmax"
      if (sym ~ /layernorm|rmsnorm/) return "layernorm"
      if (sym ~ /exp|tanh|gelu|sigmoid|relu|silu|swiglu/) return "elementwise"
      if (sym ~ /adam|clip_grad|finite|grad_norm/) return "optimizer"
      return "rest"
    }
    # one line per sample: "pid/tid  address  symbol  (dso)"
    NF >= 3 {
      split($1, id, "/"); worker = id[1] != id[2]
      sym = $3; dso = $NF; gsub(/[()]/, "", dso)
      part = classify(sym, dso)
      if (worker) { if (part != "threads" && part != "os") worker_busy++; next }
      share[part]++; total++; fn[sym]++
    }
    END {
      if (total == 0) { print "profile_step.sh: no samples of the timed steps" > "/dev/stderr"; exit 1 }
      n = split("kernel packing gemm_other softmax layernorm elementwise optimizer threads memory libm os rest", parts, " ")
      gemm = (share["kernel"] + share["packing"] + share["gemm_other"]) / total
      gflops = (ms > 0 && gemm > 0) ? 2.0 * macs * 1e6 / (ms * 1e-3 * gemm) * 1e-9 : 0
      row = sprintf("| %s | %s | %.2f | %.1f | %.0f |", chapter, config, ms, 2.0 * macs * 1e-3, gflops)
      for (i = 1; i <= n; i++) row = row sprintf(" %.0f |", 100.0 * share[parts[i]] / total)
      row = row (config ~ / 1t$/ ? " - |" : sprintf(" %.0f |", 100.0 * worker_busy / total))
      print row
      if (top > 0) {
        cmd = "sort -t \"\t\" -k2,2nr | head -n " top
        for (f in fn) printf "%s\t%d\t%.1f%%\n", f, fn[f], 100.0 * fn[f] / total | cmd
        close(cmd)
      }
    }'
