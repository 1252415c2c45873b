#!/usr/bin/env bash
# perf_table.sh - the README's performance tables, in Markdown, from the last `make bench`.
#
#   bash tools/perf_table.sh [RESULTS_DIR]      default bench/results
#
# Reads RESULTS_DIR/sgemm.tsv (bench/bench_sgemm.c) and RESULTS_DIR/train_step.tsv
# (bench/bench_train_step.c + tools/bench_torch.py) and prints, on stdout:
#   - the machine (lscpu), the compiler and the command that produced the figures;
#   - SGEMM GFLOP/s per shape: naive, our AVX2 kernel, OpenBLAS (as installed and
#     restricted to its AVX2 kernels), on 1 and 2 threads;
#   - milliseconds per training step per chapter: naive, AVX2, PyTorch, and the ratios.
# Paste the output into README.md. Plain bash + awk: no Python needed.
set -u
results=${1:-bench/results}
sgemm=$results/sgemm.tsv
steps=$results/train_step.tsv

cpu_field() {  # the value of one lscpu field, e.g. cpu_field 'Model name'
  lscpu 2>/dev/null | awk -F: -v key="$1" '$1 == key { sub(/^[ \t]+/, "", $2); print $2; exit }'
}

echo "### Performance"
echo
echo "Measured with \`make bench\` (= \`bash bench/run.sh build\`; raw figures in \`$results/\`)"
echo "on: $(cpu_field 'Model name'), $(nproc) cores, L1d $(cpu_field 'L1d cache'), L2 $(cpu_field 'L2 cache'),"
echo "L3 $(cpu_field 'L3 cache'); $(cc --version 2>/dev/null | head -n 1), -O2."

if [ -f "$sgemm" ]; then
  echo
  echo "SGEMM, single-precision GFLOP/s (median of 5; \`ob\` = OpenBLAS as installed, \`ob-avx2\` ="
  echo "OpenBLAS with \`OPENBLAS_CORETYPE=Haswell\`, its AVX2 kernels):"
  echo
  awk -F'\t' '
    NR == 1 { next }
    $1 ~ /^fma-peak/ { peak[$1, $2] = $6; next }
    {
      shape = $7 " " $3 "x" $4 "x" $5
      if (!(shape in seen)) { seen[shape] = 1; order[++n] = shape }
      g[$1, $2, shape] = $6
    }
    function cell(impl, t, shape) { return ((impl, t, shape) in g) ? sprintf("%.1f", g[impl, t, shape]) : "-" }
    function ratio(a, b, t, shape) {
      if ((a, t, shape) in g && (b, t, shape) in g && g[b, t, shape] > 0)
        return sprintf("%.2fx", g[a, t, shape] / g[b, t, shape])
      return "-"
    }
    END {
      print "| op, M x N x K | threads | naive | avx2 | ob | ob-avx2 | avx2 / ob-avx2 |"
      print "|---|---|---|---|---|---|---|"
      for (t = 1; t <= 2; t++)
        for (i = 1; i <= n; i++) {
          s = order[i]
          printf "| %s | %d | %s | %s | %s | %s | %s |\n", s, t, cell("naive", t, s), cell("avx2", t, s),
                 cell("openblas", t, s), cell("openblas-avx2", t, s), ratio("avx2", "openblas-avx2", t, s)
        }
      if (("fma-peak-avx2", 1) in peak)
        printf "\nFMA peak (register-only loop): AVX2 %.1f GFLOP/s on 1 thread, %.1f on 2.\n",
               peak["fma-peak-avx2", 1], peak["fma-peak-avx2", 2]
    }' "$sgemm"
else
  echo
  echo "($sgemm not found: run make bench)"
fi

if [ -f "$steps" ]; then
  echo
  echo "One training step of each chapter's default model (zero grad, forward, backward, clip,"
  echo "Adam), milliseconds, median of 7; PyTorch runs the same model on the same batch"
  echo "(\`tools/bench_torch.py\`). Ratios above 1x mean ours is faster."
  echo
  awk -F'\t' '
    NR == 1 { next }
    {
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      ms[$1, $2, $3] = $4
    }
    function cell(ch, impl, t) { return ((ch, impl, t) in ms) ? sprintf("%.1f", ms[ch, impl, t]) : "-" }
    function best(ch, impl,   t, b) {
      b = 0
      for (t = 1; t <= 2; t++)
        if ((ch, impl, t) in ms && (b == 0 || ms[ch, impl, t] < b)) b = ms[ch, impl, t]
      return b
    }
    END {
      print "| chapter | naive 1t | avx2 1t | avx2 2t | torch 1t | torch 2t | naive / avx2 (1t) | torch / avx2 (best of each) |"
      print "|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        ch = order[i]
        a = best(ch, "avx2"); tb = best(ch, "torch")
        speed = "-"
        if ((ch, "naive", 1) in ms && (ch, "avx2", 1) in ms) speed = sprintf("%.1fx", ms[ch, "naive", 1] / ms[ch, "avx2", 1])
        vs = (a > 0 && tb > 0) ? sprintf("%.2fx", tb / a) : "-"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", ch, cell(ch, "naive", 1), cell(ch, "avx2", 1),
               cell(ch, "avx2", 2), cell(ch, "torch", 1), cell(ch, "torch", 2), speed, vs
      }
    }' "$steps"
else
  echo
  echo "($steps not found: run make bench)"
fi
