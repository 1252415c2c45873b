# generate.gp - line plot written by plot_lines (common/io/plot.c).
# Data: generate.dat (column 1 = x, then one column per series). Render from this directory:
#   gnuplot generate.gp    -> generate.png
if (strstrt(GPVAL_TERMINALS, " pngcairo ") > 0) {
    set terminal pngcairo noenhanced size 900,560 font "Sans,10"
} else {
    set terminal png noenhanced size 900,560
}
# gnuplot -c this.gp FILE draws into FILE instead of the .png below
if (ARGC > 0) {
    set output ARG1
} else {
    set output "generate.png"
}
set title "GPT generation, greedy: tokens/s up to a context of n (log-log)"
set xlabel "context n (positions; 1-token prompt, n tokens generated)"
set ylabel "tokens/s"
set grid
set key top left
set logscale y
set logscale x 2
plot "generate.dat" using 1:2 with lines linewidth 2 title "KV cache (one row per block per token)", \
     "generate.dat" using 1:3 with lines linewidth 2 title "no cache (the whole window per token)"
