#!/usr/bin/env bash
# perf_table.sh - the performance tables of bench/README.md, in Markdown, from the last `make bench`.
#
#   bash tools/perf_table.sh [RESULTS_DIR]      default bench/results
#
# Reads RESULTS_DIR/sgemm.tsv (bench/bench_sgemm.c) and RESULTS_DIR/train_step.tsv
# (bench/bench_train_step.c + tools/bench_torch.py) and prints, on stdout:
#   - the machine (lscpu), the compiler and the command that produced the figures;
#   - SGEMM GFLOP/s per shape: naive, our AVX2 and AVX-512 kernels, OpenBLAS (restricted to
#     its AVX2 kernels, and as installed), on 1 and 2 threads, with the paired ratios;
#   - milliseconds per training step per chapter: naive, AVX2, AVX-512, PyTorch, and the ratios;
#   - with RESULTS_DIR/train_step_busy.tsv: the steps beside a busy process, 1 and 2 threads;
#   - with RESULTS_DIR/transformer_peak.tsv: chapter 06's training step at D = 256, 4 + 4 layers
#     (bench/bench_transformer.c): GFLOP/s, fraction of the FMA peak, where the time goes;
#   - with RESULTS_DIR/vecmath.tsv: the element-wise kernels, LayerNorm and softmax rows, naive against AVX2;
#   - with RESULTS_DIR/data_parallel.tsv: a ViT step on 2 cores, one model or two replicas (bench_data_parallel).
#   - with RESULTS_DIR/fetch.tsv: the long ViT step with and without asking for the next block early (bench_fetch).
#   - with RESULTS_DIR/direct.tsv: A read in place or packed, per product, and which the rule picks (bench_direct),
#     under the machine that file names (it may come from another machine than the rest).
# bench/README.md's tables are rewritten from the same files by tools/bench_tables.py; this script prints
# them on a terminal. Plain bash + awk: no Python needed.
set -u
results=${1:-bench/results}
sgemm=$results/sgemm.tsv
steps=$results/train_step.tsv

cpu_field() {  # the value of one lscpu field, e.g. cpu_field 'Model name'
  lscpu 2>/dev/null | awk -F: -v key="$1" '$1 == key { sub(/^[ \t]+/, "", $2); print $2; exit }'
}

echo "From one run of \`make bench\` (= \`bash bench/run.sh build\`; raw figures in \`$results/\`)"
if [ -f "$results/machine.txt" ]; then   # written by bench/run.sh on the machine that ran it
  echo "on: $(cat "$results/machine.txt"), -O2."
else
  echo "on: $(cpu_field 'Model name'), $(nproc) cores, L1d $(cpu_field 'L1d cache'), L2 $(cpu_field 'L2 cache'),"
  echo "L3 $(cpu_field 'L3 cache'); $(cc --version 2>/dev/null | head -n 1), -O2."
fi

if [ -f "$sgemm" ]; then
  echo
  echo "SGEMM, single-precision GFLOP/s (median of 9). Each of our kernels is timed beside OpenBLAS"
  echo "using the same instruction set, the two taking turns sample by sample: \`avx512\` beside"
  echo "\`ob\` (OpenBLAS as installed, AVX-512 kernels on this CPU), \`avx2\` beside \`ob-avx2\`"
  echo "(\`OPENBLAS_CORETYPE=Haswell\`, its AVX2 kernels; that pair runs in a second process)."
  echo "On 2 threads the samples are taken in blocks, one per sample, the implementations taking turns"
  echo "(see bench/bench_sgemm.c). \`of peak\`: avx512 against the AVX-512 FMA peak. Products below 2^19"
  echo "multiply-adds (about 80^3) run on one thread even when two are allowed; the smallest ones (2^12"
  echo "multiply-adds with AVX-512, 2^14 with AVX2) skip the register tile, and products whose rows lie"
  echo "at most 2 KiB apart with N <= 512 read A (and with AVX-512, B) in place, unpacked"
  echo "(common/kernels/matmul_blocked.c)."
  echo
  awk -F'\t' '
    NR == 1 { next }
    $1 ~ /^fma-peak/ { peak[$1, $2] = $6; next }
    {
      shape = $7 " " $3 "x" $4 "x" $5
      if (!(shape in seen)) { seen[shape] = 1; order[++n] = shape }
      g[$1, $2, shape] = $6; frac[$1, $2, shape] = $8; vs[$1, $2, shape] = $9
    }
    function cell(impl, t, shape) { return ((impl, t, shape) in g) ? sprintf("%.1f", g[impl, t, shape]) : "-" }
    function ratio(impl, t, shape) {
      return ((impl, t, shape) in vs && vs[impl, t, shape] != "-") ? sprintf("%.2fx", vs[impl, t, shape]) : "-"
    }
    function share(impl, t, shape) {
      return ((impl, t, shape) in frac) ? sprintf("%.0f%%", 100 * frac[impl, t, shape]) : "-"
    }
    END {
      print "| op, M x N x K | threads | naive | avx2 | ob-avx2 | avx2 / ob-avx2 | avx512 | ob | avx512 / ob | of peak |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      for (t = 1; t <= 2; t++)
        for (i = 1; i <= n; i++) {
          s = order[i]
          a2 = (("avx2-paired", t, s) in g) ? "avx2-paired" : "avx2"
          printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", s, t, cell("naive", t, s),
                 cell(a2, t, s), cell("openblas-avx2", t, s), ratio(a2, t, s),
                 cell("avx512", t, s), cell("openblas", t, s), ratio("avx512", t, s), share("avx512", t, s)
        }
      if (("fma-peak-avx2", 1) in peak) {
        printf "\nFMA peak (register-only loop): AVX2 %.1f GFLOP/s on 1 thread, %.1f on 2", peak["fma-peak-avx2", 1], peak["fma-peak-avx2", 2]
        if (("fma-peak-avx512", 1) in peak)
          printf "; AVX-512 %.1f and %.1f", peak["fma-peak-avx512", 1], peak["fma-peak-avx512", 2]
        print "."
      }
    }' "$sgemm"
else
  echo
  echo "($sgemm not found: run make bench)"
fi

if [ -f "$steps" ]; then
  echo
  echo "One training step of each chapter's default model (zero grad, forward, backward, clip,"
  echo "Adam), milliseconds; PyTorch runs the same model on the same batch (\`tools/bench_torch.py\`)."
  echo "C and PyTorch take turns in 3 rounds (\`ROUNDS\`); each figure is the median over the rounds"
  echo "of a median of 7 steps. Ratios above 1x mean ours is faster."
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
      print "| chapter | naive 1t | avx2 1t | avx2 2t | avx512 1t | avx512 2t | torch 1t | torch 2t | naive / avx2 (1t) | torch / ours (best of each) |"
      print "|---|---|---|---|---|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        ch = order[i]
        a = best(ch, "avx2"); a512 = best(ch, "avx512"); tb = best(ch, "torch")
        ours = (a512 > 0 && a512 < a) ? a512 : a
        speed = "-"
        if ((ch, "naive", 1) in ms && (ch, "avx2", 1) in ms) speed = sprintf("%.1fx", ms[ch, "naive", 1] / ms[ch, "avx2", 1])
        vs = (ours > 0 && tb > 0) ? sprintf("%.2fx", tb / ours) : "-"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", ch, cell(ch, "naive", 1), cell(ch, "avx2", 1),
               cell(ch, "avx2", 2), cell(ch, "avx512", 1), cell(ch, "avx512", 2), cell(ch, "torch", 1),
               cell(ch, "torch", 2), speed, vs
      }
    }' "$steps"
else
  echo
  echo "($steps not found: run make bench)"
fi

busy=$results/train_step_busy.tsv
if [ -f "$busy" ]; then
  echo
  echo "The same steps while another process spins on one core (\`bench_train_step --busy\`), on the"
  echo "default backend: two threads must not be much slower than one (see common/README.md, step 5)."
  echo
  awk -F'\t' '
    NR == 1 { next }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } ms[$1, $3] = $4; impl = $2 }
    END {
      print "| chapter (" impl ") | 1 thread | 2 threads | 2 threads / 1 thread |"
      print "|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        ch = order[i]
        printf "| %s | %.1f | %.1f | %.2fx |\n", ch, ms[ch, 1], ms[ch, 2], ms[ch, 2] / ms[ch, 1]
      }
    }' "$busy"
fi

peak=$results/transformer_peak.tsv
if [ -f "$peak" ]; then
  echo
  awk -F'\t' 'NR == 2 {
      printf "Chapter 06'"'"'s training step at a larger size (`bench_transformer`: %s, pre-norm, GELU, synthetic\n", $1
      printf "batch; median of %d steps): %.1f GFLOP per step, counted from its matrix products (2 M N K each, backward\n", $16, $4
      print "= 2 x forward, attention products included). `of peak`: against the register-only FMA loop on the same"
      print "instruction set and threads. `proj` and `attn`: the step'"'"'s products replayed alone (projections + MLP +"
      print "output; the per-(sequence, head) attention products), `other` = forward + backward - both: softmax, norms,"
      print "GELU, residuals, embeddings, loss; `optimizer` = zero grad + clip + Adam."
    }' "$peak"
  echo
  awk -F'\t' '
    NR == 1 { next }
    BEGIN {
      print "| backend | threads | ms per step | GFLOP/s | of peak | fwd + bwd ms | optimizer ms | proj ms (GFLOP/s) | attn ms (GFLOP/s) | other ms |"
      print "|---|---|---|---|---|---|---|---|---|---|"
    }
    {
      printf "| %s | %d | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f (%.1f) | %.1f (%.1f) | %.1f |\n", $2, $3, $5, $6,
             100 * $8, $9, $10, $11, $14, $12, $15, $13
    }' "$peak"
fi

vecmath=$results/vecmath.tsv
if [ -f "$vecmath" ]; then
  echo
  echo "Element-wise kernels, LayerNorm and softmax rows (\`bench_vecmath\`), ns per element, 1 thread, median of 9:"
  echo
  awk -F'\t' '
    NR == 1 { next }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } ns[$1, $2] = $4 }
    END {
      print "| kernel | naive | avx2 | naive / avx2 |"
      print "|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        k = order[i]
        printf "| %s | %.2f | %.2f | %.1fx |\n", k, ns[k, "naive"], ns[k, "avx2"], ns[k, "naive"] / ns[k, "avx2"]
      }
    }' "$vecmath"
fi

parallel=$results/data_parallel.tsv
if [ -f "$parallel" ]; then
  echo
  echo "Two cores for one ViT training step (\`bench_data_parallel\`): the products split between the threads, or"
  echo "the batch of 128 split between two replicas of the model (\`--replicas 2\`); median of the steps, the three"
  echo "ways taking turns:"
  echo
  awk -F'\t' '
    NR == 1 { next }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } ms[$1, $2] = $3; ips[$1, $2] = $4 }
    END {
      print "| model | 1 model, 1 thread: ms (images/s) | 1 model, 2 threads | 2 replicas, 1 thread each | 2 replicas / 1 model on 2 threads |"
      print "|---|---|---|---|---|"
      for (i = 1; i <= n; i++) {
        k = order[i]
        printf "| %s | %.1f (%.0f) | %.1f (%.0f) | %.1f (%.0f) | %.2fx |\n", k, ms[k, "one_model_1_thread"],
               ips[k, "one_model_1_thread"], ms[k, "one_model_2_threads"], ips[k, "one_model_2_threads"],
               ms[k, "two_replicas"], ips[k, "two_replicas"], ms[k, "one_model_2_threads"] / ms[k, "two_replicas"]
      }
    }' "$parallel"
fi

fetch=$results/fetch.tsv
if [ -f "$fetch" ]; then
  echo
  echo "Asking for the next block while the kernel computes (\`bench_fetch\`): chapter 07's long ViT training step as it"
  echo "trains (128 images, two replicas, one thread each), the fetching on and off by turns, median of the steps:"
  echo
  awk -F'\t' '
    NR == 1 { next }
    { printf "%s| %s | %.1f | %.1f | %.3fx |\n", (n++ ? "" : "| model | on: ms/step | off: ms/step | off / on |\n|---|---|---|---|\n"), $1, $2, $3, $3 / $2 }
  ' "$fetch"
fi

direct=$results/direct.tsv
if [ -f "$direct" ]; then
  echo
  echo "Reading A in place or packing it (\`bench_direct\`, 1 thread, the two paths taking turns, median of the samples;"
  echo "GFLOP/s; packed/direct above 1: packing is faster; auto: the path the driver's rule takes) on"
  echo "$(sed -n '1s/^# machine: //p' "$direct"):"
  echo
  awk -F'\t' '
    /^#/ || $1 == "op" { next }
    { right = ($8 == "direct") ? ($6 >= $7) : ($7 >= $6)
      printf "%s| %s %dx%dx%d | %s | %.1f | %.1f | %.2fx | %s%s |\n", (n++ ? "" : "| op, M x N x K | kernel | direct | packed | packed/direct | auto |\n|---|---|---|---|---|---|\n"),
             $1, $2, $3, $4, $5, $6, $7, $7 / $6, $8, right ? "" : " (the slower here)" }
  ' "$direct"
fi
