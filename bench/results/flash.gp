# flash.gp - written by bench_flash: plain against fused attention, one head, D_H = 64.
set terminal pngcairo size 1100,450 font ',10'
set output 'flash.png'
set multiplot layout 1,2
set logscale xy 2
set key top left
set grid
set xrange [181:11585]
set xlabel 'N (sequence length)'
set title 'forward + backward, one head (log-log)'
set ylabel 'ms (median)'
plot "< grep '^plain' flash.tsv" using 2:3 with linespoints title 'plain', \
     "< grep '^fused' flash.tsv" using 2:3 with linespoints title 'fused'
set title 'extra memory beyond the O(N) activations (log-log)'
set ylabel 'bytes'
set logscale y 10
plot "< grep '^plain' flash.tsv" using 2:4 with linespoints title 'plain: 3 N^2 floats', \
     "< grep '^fused' flash.tsv" using 2:4 with linespoints title 'fused: O(N)'
unset multiplot
