#!/usr/bin/env bash
# translate_compare.sh - the lecture's first lesson on its own data: chapters 01 (a fixed context),
# 02 (additive attention), 03 (scaled dot-product attention) and 06 (the transformer) translating
# English Bible verses into Spanish (--task translate), the same steps, batch and test verses, scored
# with BLEU by the source's length in words (make run calls it).
#
#   bash tools/translate_compare.sh                     STEPS=300 BATCH=32 (make run's budget, about 7 minutes)
#   STEPS=3000 bash tools/translate_compare.sh          ten times as long
# make run's budget learns little (a loss near 6 nats a piece, BLEU below 1 for every chapter): it
# shows the pipeline; each chapter's --preset long-translate (about 30 minutes) is where BLEU grows.
#   /usr/bin/python3 tools/readme_tables.py --print translate          the table
#
# Each chapter keeps its own quick-default model (its --help) and trains with --threads THREADS
# (default 2); the runs are made anew into OUT/translate/NN_NAME (their commands in command.txt, the
# logs beside them), then OUT/translate/bleu_by_length.png draws BLEU by length, one line per
# chapter. Prints the time it took.
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
THREADS=${THREADS:-2}
STEPS=${STEPS:-300}
BATCH=${BATCH:-32}
DIR="$OUT/translate"
mkdir -p "$DIR"
start=$(date +%s)

run() {   # NAME PROGRAM: train and test it on translate
  local name=$1 program=$2
  local cmd="./$BUILD/$program --task translate --steps $STEPS --batch $BATCH --threads $THREADS --quiet --samples 2 --out $DIR/$name"
  echo "=== $name: $cmd"
  local t0; t0=$(date +%s)
  $cmd > "$DIR/$name.log" 2>&1 || { echo "$name failed; see $DIR/$name.log" >&2; exit 1; }
  echo "$cmd" > "$DIR/$name/command.txt"
  grep -E "^  BLEU" "$DIR/$name.log" | tr -s ' ' | sed "s/^/  $name:/"
  echo "=== $name: $(( $(date +%s) - t0 )) s"
}

run 01_rnn 01_rnn_seq2seq
run 02_bahdanau 02_bahdanau_attention
run 03_dot 03_dot_product_attention
run 06_transformer 06_transformer

# the picture: one line per chapter (fixed names: gnuplot runs inside DIR, so no path of the user's
# goes into its text)
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --data translate > "$DIR/bleu_by_length.dat"
if command -v gnuplot > /dev/null; then
  (cd "$DIR" && gnuplot <<'EOF'
set terminal pngcairo size 900,500
set output 'bleu_by_length.png'
set title 'English -> Spanish, test verses: BLEU by the source length'
set xlabel 'English words in the source (1-10, 11-20, 21-30, 31-40, 41+)'
set ylabel 'BLEU'
set xtics ('1-10' 5.5, '11-20' 15.5, '21-30' 25.5, '31-40' 35.5, '41+' 45.5)
set yrange [0:*]
set key top right
set grid ytics
plot 'bleu_by_length.dat' index 0 with linespoints lw 2 title 'chapter 01, fixed context', \
     '' index 1 with linespoints lw 2 title 'chapter 02, additive attention', \
     '' index 2 with linespoints lw 2 title 'chapter 03, scaled dot product', \
     '' index 3 with linespoints lw 2 title 'chapter 06, transformer'
EOF
  )
  echo "translate_compare.sh: $DIR/bleu_by_length.png"
fi
echo "translate_compare.sh: $(( $(date +%s) - start )) s"
