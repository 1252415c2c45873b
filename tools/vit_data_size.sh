#!/usr/bin/env bash
# vit_data_size.sh - the ViT against the CNN and the MLP as the training data grows (the table
# "vit-data-size" and the picture data_size.png of chapter 07's README): the inductive-bias lesson
# measured, whatever it shows.
#
#   bash tools/vit_data_size.sh        (or: make vit-data-size)
#
# Four models at the quick default's budget (5000 steps of 128 images, the same schedule): the ViT,
# the ViT with --augment (shifts and mirror images), the CNN (07_cnn) and the MLP (07_mlp), each
# trained on the first 1000, 5000, 20000 and all 55000 training images (--train-size), seeds 1, 2
# and 3 each: 48 runs, two at a time on one thread each (tools/lanes.sh), about 30 minutes on 2
# cores (no run over 2). Outputs OUT/vit_data_size/nSIZE/MODEL/seedK/ (results.json) and their
# .log; a run whose results.json has the same settings is reused, and said so (tools/reuse_run.sh).
# Then the table (/usr/bin/python3 tools/readme_tables.py --print vit-data-size) and, with gnuplot,
# OUT/vit_data_size/data_size.png: test accuracy against the training images, one line per model,
# the bars the three seeds' range.
# STEPS=20 is a smoke test (its runs are made again at the full budget next time).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-5000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
DIR="$OUT/vit_data_size"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

# the slowest models first, so the two lanes end together
for n in 55000 20000 5000 1000; do
  seed_runs "$DIR/n$n/cnn" 07_cnn --steps "$STEPS" --train-size "$n"
  seed_runs "$DIR/n$n/vit" 07_vision_transformer --steps "$STEPS" --train-size "$n" --pictures 0
  seed_runs "$DIR/n$n/vit-augment" 07_vision_transformer --steps "$STEPS" --train-size "$n" --augment --pictures 0
  seed_runs "$DIR/n$n/mlp" 07_mlp --steps "$STEPS" --train-size "$n"
done
lanes_wait
echo "vit_data_size: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print vit-data-size

# the picture (fixed names: gnuplot runs inside DIR, so no path of the user's goes into its text)
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --data vit-data-size > "$DIR/data_size.dat"
if command -v gnuplot > /dev/null; then
  plot="" i=0
  while read -r name; do
    plot="$plot${plot:+, }'data_size.dat' index $i using 1:2:3:4 with yerrorlines lw 2 title '$name'"
    i=$((i + 1))
  done < <(sed -n 's/^# //p' "$DIR/data_size.dat")
  (cd "$DIR" && gnuplot -e "set terminal pngcairo size 900,500; set output 'data_size.png';
    set title 'Fashion-MNIST, $STEPS steps of 128 images: test accuracy against the training images';
    set xlabel 'training images (the first N of the training split)'; set ylabel 'test accuracy (%)';
    set logscale x; set xrange [700:80000]; set xtics ('1,000' 1000, '5,000' 5000, '20,000' 20000, '55,000' 55000);
    set key below; set grid ytics; plot $plot")
  echo "vit_data_size.sh: $DIR/data_size.png"
fi
