# sgemm.gp - GFLOP/s against size for square products (data: sgemm.tsv).
# Render: cd bench/results && gnuplot sgemm.gp   (writes sgemm.png)
set terminal pngcairo size 1000,560 noenhanced
set output 'sgemm.png'
set datafile separator '\t'
set title 'SGEMM, square M = N = K, single precision'
set xlabel 'size'
set ylabel 'GFLOP/s'
set logscale x 2
set xrange [48:1400]
set xtics (64, 128, 256, 512, 1024)
set yrange [0:*]
set key outside right
set grid
sq(impl, t) = (strcol(1) eq impl && $2 == t && $3 == $4 && $4 == $5 && strcol(7) eq 'nn') ? $6 : 1/0
plot \
  'sgemm.tsv' skip 1 using 3:(sq('naive', 1)) with linespoints lc rgb '#999999' dt 1 pt 7 title 'naive, 1 thread', \
  'sgemm.tsv' skip 1 using 3:(sq('naive', 2)) with linespoints lc rgb '#999999' dt 2 pt 5 title 'naive, 2 threads', \
  'sgemm.tsv' skip 1 using 3:(sq('avx2', 1)) with linespoints lc rgb '#d62728' dt 1 pt 7 title 'avx2, 1 thread', \
  'sgemm.tsv' skip 1 using 3:(sq('avx2', 2)) with linespoints lc rgb '#d62728' dt 2 pt 5 title 'avx2, 2 threads', \
  'sgemm.tsv' skip 1 using 3:(sq('avx512', 1)) with linespoints lc rgb '#9467bd' dt 1 pt 7 title 'avx512, 1 thread', \
  'sgemm.tsv' skip 1 using 3:(sq('avx512', 2)) with linespoints lc rgb '#9467bd' dt 2 pt 5 title 'avx512, 2 threads', \
  'sgemm.tsv' skip 1 using 3:(sq('openblas', 1)) with linespoints lc rgb '#1f77b4' dt 1 pt 7 title 'openblas, 1 thread', \
  'sgemm.tsv' skip 1 using 3:(sq('openblas', 2)) with linespoints lc rgb '#1f77b4' dt 2 pt 5 title 'openblas, 2 threads', \
  'sgemm.tsv' skip 1 using 3:(sq('openblas-avx2', 1)) with linespoints lc rgb '#2ca02c' dt 1 pt 7 title 'openblas-avx2, 1 thread', \
  'sgemm.tsv' skip 1 using 3:(sq('openblas-avx2', 2)) with linespoints lc rgb '#2ca02c' dt 2 pt 5 title 'openblas-avx2, 2 threads'
