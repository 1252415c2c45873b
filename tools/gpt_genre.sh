#!/usr/bin/env bash
# gpt_genre.sh - what pretraining buys (the table "gpt-genre" and the picture genre.png of chapter
# 06's FINETUNE.md): the genre of a Brown passage (15 genres) learned from 50, 200 and 1000 labelled
# passages per genre, three ways: the GPT's shape from scratch, the pretrained GPT frozen under a
# trained head (a probe), and the pretrained GPT fine-tuned with the head.
#
#   bash tools/gpt_genre.sh        (or: make gpt-genre)
#
# For each seed K of 1, 2 and 3: the pretraining, 06_gpt at its quick default with --seed K, into
# OUT/gpt_genre/pretrain/seedK; then the three ways (06_gpt_genre --runs WAY, STEPS steps of 16 passages,
# the same schedule at every size) with --seed K, the pretrained ones from seed K's GPT, on the 900
# test passages: 30 runs, two at a time on one thread each (tools/lanes.sh), about 25 minutes on 2
# cores. Outputs OUT/gpt_genre/nSIZE/WAY/seedK/ (results.json) and their .log; a run whose
# results.json has the same settings is reused, and said so (tools/reuse_run.sh). Then the table
# (/usr/bin/python3 tools/readme_tables.py --print gpt-genre) and, with gnuplot,
# OUT/gpt_genre/genre.png: test accuracy against the labelled passages, one line per way, the bars
# the three seeds' range. STEPS=20 is a smoke test (GPT_STEPS=20 for the pretraining).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-600}
GPT_STEPS=${GPT_STEPS:-2000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
DIR="$OUT/gpt_genre"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

# 1. the pretraining: one GPT per seed, seed K's into pretrain/seedK
seed_runs "$DIR/pretrain" 06_gpt --steps "$GPT_STEPS"
lanes_wait

# 2. the three ways per size and seed, the pretrained ones from that seed's GPT (the largest first,
#    so the two lanes end together)
gpt="$DIR/pretrain/seed{seed}/model.ckpt"
for n in 1000 200 50; do
  for way in finetune scratch probe; do
    seed_runs "$DIR/n$n/$way" 06_gpt_genre --gpt "$gpt" --runs "$way" --per-genre "$n" --steps "$STEPS"
  done
done
lanes_wait
echo "gpt_genre: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print gpt-genre

# the picture (fixed names: gnuplot runs inside DIR, so no path of the user's goes into its text)
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --data gpt-genre > "$DIR/genre.dat"
if command -v gnuplot > /dev/null; then
  plot="" i=0
  while read -r name; do
    plot="$plot${plot:+, }'genre.dat' index $i using 1:2:3:4 with yerrorlines lw 2 title '$name'"
    i=$((i + 1))
  done < <(sed -n 's/^# //p' "$DIR/genre.dat")
  (cd "$DIR" && gnuplot -e "set terminal pngcairo size 900,500; set output 'genre.png';
    set title 'Brown genre (15 classes), $STEPS steps of 16 passages: test accuracy against the labels';
    set xlabel 'labelled passages per genre (fewer where a genre has fewer)'; set ylabel 'test accuracy (%)';
    set logscale x; set xrange [35:1400]; set xtics ('50' 50, '200' 200, '1000' 1000);
    set yrange [0:*]; set key below; set grid ytics;
    plot $plot, 100.0/15 with lines dt 2 lc rgb 'gray' title 'chance (1 in 15)'")
  echo "gpt_genre.sh: $DIR/genre.png"
fi
