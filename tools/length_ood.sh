#!/usr/bin/env bash
# length_ood.sh - length generalisation: train on reversed strings of 5-40 letters, test on 41-80
# (the out-of-distribution table and plot of chapter 06's README).
#
#   bash tools/length_ood.sh            (or: make length-ood)
#   /usr/bin/python3 tools/readme_tables.py --print length-ood      the table
#
# Four models, one after another, each trained as in tools/compare_seq2seq.sh (2000 steps of 32,
# lr 3e-3, seed 42, --threads THREADS, default 2) on reverse 5-40:
#   06_sinusoidal  chapter 06's transformer, sinusoidal positions added to X (the default)
#   06_learned     ... a learned table of 40 source rows: past it, every position gets row 40's vector
#   06_rope        ... rotary positions on Q and K of the self-attention
#   02_bahdanau    chapter 02's GRU encoder-decoder with additive attention
# then each checkpoint tested on 2000 strings of 41-80 letters (--load CKPT --min-len 41 --max-len 80).
# Outputs OUT/length_ood/NAME/ (the training run, its test on 5-40), OUT/length_ood/NAME_41_80/
# (the longer test), NAME.log, and length_ood.png: exact match by input length, one line per model.
# A run whose results.json exists with the same settings (tools/reuse_run.sh: steps, lengths, flags)
# is reused, and said so; one of other settings (a STEPS=50 smoke test) is run again. Prints the
# time it took. STEPS=50 for a smoke test.
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
THREADS=${THREADS:-2}
STEPS=${STEPS:-2000}
DIR="$OUT/length_ood"
mkdir -p "$DIR"
start=$(date +%s)
source "$(dirname "$0")/reuse_run.sh"

# run NAME CHAPTER FLAGS...: train on 5-40, then test the checkpoint on 41-80
run() {
  local name=$1 ch=$2 trained=0
  shift 2
  if ! reuse_run "$DIR/$name" --task reverse --min-len 5 --max-len 40 --steps "$STEPS" --batch 32 "$@"; then
    echo "$name: $BUILD/$ch $* (reverse 5-40, $STEPS steps of 32)"
    "./$BUILD/$ch" --task reverse --min-len 5 --max-len 40 --steps "$STEPS" --batch 32 --threads "$THREADS" --quiet \
      --out "$DIR/$name" "$@" > "$DIR/$name.log" 2>&1 || { echo "$name failed; see $DIR/$name.log" >&2; exit 1; }
    trained=1
  fi
  # the test on 41-80 is of the checkpoint above: again whenever it was trained again
  if [ "$trained" = 1 ] || ! reuse_run "$DIR/${name}_41_80" "$@"; then
    "./$BUILD/$ch" --load "$DIR/$name/model.ckpt" --min-len 41 --max-len 80 --threads "$THREADS" --samples 4 \
      --out "$DIR/${name}_41_80" >> "$DIR/$name.log" 2>&1 || { echo "$name (41-80) failed; see $DIR/$name.log" >&2; exit 1; }
  fi
  grep -E "^  exact match" "$DIR/$name.log" | tr -s ' ' | sed "s/^/  $name:/"
}

run 06_sinusoidal 06_transformer --pos sinusoidal
run 06_learned 06_transformer --pos learned
run 06_rope 06_transformer --pos rope
run 02_bahdanau 02_bahdanau_attention

# the plot: every length bucket of both tests, one line per model (fixed names: the script is run
# inside DIR, so no path of the user's goes into gnuplot's text)
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --data length-ood > "$DIR/length_ood.dat"
(cd "$DIR" && gnuplot <<'EOF'
set terminal pngcairo size 900,500
set output 'length_ood.png'
set title 'reverse: trained on 5-40 letters, tested on 5-80'
set xlabel 'input length (middle of the bucket)'
set ylabel 'exact match (%)'
set yrange [0:105]
set key bottom left
set arrow from 40.5, graph 0 to 40.5, graph 1 nohead dashtype 2
plot 'length_ood.dat' index 0 with linespoints title 'transformer, sinusoidal', \
     '' index 1 with linespoints title 'transformer, learned', \
     '' index 2 with linespoints title 'transformer, RoPE', \
     '' index 3 with linespoints title 'chapter 02, Bahdanau' 
EOF
)
echo "length_ood.sh: $DIR/length_ood.png"
echo "length_ood.sh: $(( $(date +%s) - start )) s"
