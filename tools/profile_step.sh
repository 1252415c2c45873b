#!/usr/bin/env bash
# profile_step.sh - where the time of one chapter's training step goes.
#
#   bash tools/profile_step.sh CHAPTER BACKEND THREADS [REPS]
#   e.g. bash tools/profile_step.sh 04 avx512 2
#
# Builds bench_train_step with frame pointers (in build-prof/, so that perf
# can walk each sample's stack), runs it on one configuration (--chapters
# CHAPTER --backends BACKEND --threads THREADS, REPS timed steps, default 60)
# under `perf record -g` (Debian's linux-perf: user-space sampling at 4 kHz,
# which works in a virtual machine without hardware counters), keeps the
# samples taken inside a timed step (the main thread's stack holds
# timed_step; the OpenMP worker thread's samples all count: it only works
# inside steps' parallel regions), and sorts them by the function they landed
# in:
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
# Prints one Markdown row: the chapter, the configuration, the step's
# samples, then each part's share in percent (adding up to 100 up to
# rounding); PROFILE_TOP=N also prints the N functions with most samples.
# A missing perf is reported and the script exits 1.
set -u
chapter=${1:?usage: profile_step.sh CHAPTER BACKEND THREADS [REPS]}
backend=${2:?backend (naive, avx2, avx512)}
threads=${3:?threads (1 or 2)}
reps=${4:-60}
cd "$(dirname "$0")/.." || exit 1
command -v perf >/dev/null 2>&1 || { echo "profile_step.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
make --no-print-directory -s BUILD=build-prof OPT="-O2 -fno-omit-frame-pointer" BENCH_LIBS=-lopenblas \
  build-prof/bench/bench_train_step >/dev/null || { echo "profile_step.sh: build failed" >&2; exit 1; }
bin=build-prof/bench/bench_train_step
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! perf record -q -g -F 4000 -o "$work/perf.data" "$bin" --out "$work" --reps "$reps" \
      --chapters "$chapter" --backends "$backend" --threads "$threads" >"$work/out.txt" 2>&1; then
  echo "profile_step.sh: perf record failed:" >&2; tail -n 5 "$work/out.txt" >&2; exit 1
fi
perf script -i "$work/perf.data" -F pid,tid,ip,sym,dso 2>/dev/null |
  awk -v chapter="$chapter" -v config="$backend ${threads}t" -v top="${PROFILE_TOP:-0}" '
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
    function finish() {
      if (leaf_sym == "") return
      if (worker || in_step) {
        part = classify(leaf_sym, leaf_dso); share[part]++; total++; fn[leaf_sym]++
      }
      leaf_sym = ""
    }
    /^ *[0-9]+\/[0-9]+ *$/ { finish(); split($1, id, "/"); worker = id[1] != id[2]; in_step = 0; first = 1; next }
    NF >= 2 {
      sym = $2; dso = $NF; gsub(/[()]/, "", dso)
      if (first) { leaf_sym = sym; leaf_dso = dso; first = 0 }
      if (sym == "timed_step") in_step = 1
    }
    END {
      finish()
      if (total == 0) { print "profile_step.sh: no samples inside a timed step" > "/dev/stderr"; exit 1 }
      n = split("kernel packing gemm_other softmax layernorm elementwise optimizer threads memory libm os rest", parts, " ")
      row = sprintf("| %s | %s | %d |", chapter, config, total)
      for (i = 1; i <= n; i++) row = row sprintf(" %.0f |", 100.0 * share[parts[i]] / total)
      print row
      if (top > 0) {
        cmd = "sort -t \"\t\" -k2,2nr | head -n " top
        for (f in fn) printf "%s\t%d\t%.1f%%\n", f, fn[f], 100.0 * fn[f] / total | cmd
        close(cmd)
      }
    }'
