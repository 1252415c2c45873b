#!/usr/bin/env bash
# translate_compare.sh - the lecture's first lesson on its own data: chapters 01 (a fixed context),
# 02 (additive attention), 03 (scaled dot-product attention) and 06 (the transformer) translating
# English Bible verses into Spanish (--task translate), the same test verses, scored with BLEU by
# the source's length in words (make run calls it).
#
#   bash tools/translate_compare.sh                     STEPS=300 BATCH=32 (make run's budget, about 7 minutes)
#   STEPS=3000 bash tools/translate_compare.sh          ten times as long
#   PRESET=long-translate CHAPTERS="01 02" bash tools/translate_compare.sh
#                                                       each chapter's --preset long-translate instead,
#                                                       into OUT/translate_long (about 30 minutes each; a run
#                                                       there with the preset's settings is reused, and said so)
#   /usr/bin/python3 tools/readme_tables.py --print translate          the table (translate-long)
#
# make run's budget learns little (a loss near 6 nats a piece, BLEU below 1 for every chapter): it
# shows the pipeline; the long presets are where BLEU grows. Each chapter keeps its own quick-default
# model (its --help) and trains with --threads THREADS (default 2), LANES runs at a time (default 1;
# make run: THREADS=1 LANES=2, tools/lanes.sh); the runs are made anew into
# OUT/translate/NN_NAME (their commands in command.txt, the logs beside them), then
# bleu_by_length.png there draws BLEU by length, one line per chapter. Prints the time it took.
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
THREADS=${THREADS:-2}
STEPS=${STEPS:-300}
BATCH=${BATCH:-32}
PRESET=${PRESET:-}
CHAPTERS=${CHAPTERS:-01 02 03 06}
case "$PRESET" in
  "") DIR="$OUT/translate"; TABLE=translate ;;
  long-translate) DIR="$OUT/translate_long"; TABLE=translate-long ;;
  *) echo "translate_compare: PRESET=$PRESET: expected long-translate or nothing" >&2; exit 2 ;;
esac
mkdir -p "$DIR"
start=$(date +%s)
source "$(dirname "$0")/lanes.sh"
source "$(dirname "$0")/reuse_run.sh"

run() {   # NAME PROGRAM: train and test it on translate
  local name=$1 program=$2 budget=(--task translate --steps "$STEPS" --batch "$BATCH")
  if [ -n "$PRESET" ]; then
    budget=(--preset "$PRESET")
    # a long run already made with the flags the preset stands for (the chapter's main.c sets them) is reused
    local flags
    flags=$(sed -n 's/.*\.preset_translate = "\(.*\)",.*/\1/p' "chapters/$program/main.c")
    # shellcheck disable=SC2086
    if [ -n "$flags" ] && reuse_run "$DIR/$name" $flags; then return 0; fi
  fi
  local cmd=("./$BUILD/$program" "${budget[@]}" --threads "$THREADS" --quiet --samples 4 --out "$DIR/$name")
  mkdir -p "$DIR/$name"
  echo "${cmd[*]}" > "$DIR/$name/command.txt"
  lane "$name" "$DIR/$name.log" "${cmd[@]}"
}

for c in $CHAPTERS; do
  case "$c" in
    01) run 01_rnn 01_rnn_seq2seq ;;
    02) run 02_bahdanau 02_bahdanau_attention ;;
    03) run 03_dot 03_dot_product_attention ;;
    06) run 06_transformer 06_transformer ;;
    *) echo "translate_compare: CHAPTERS: '$c' is not 01, 02, 03 or 06" >&2; exit 2 ;;
  esac
done
lanes_wait

# the picture: one line per chapter in the data (fixed names: gnuplot runs inside DIR, so no path of
# the user's goes into its text)
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --data "$TABLE" > "$DIR/bleu_by_length.dat"
if command -v gnuplot > /dev/null; then
  plot="" i=0
  while read -r name; do
    plot="$plot${plot:+, }'bleu_by_length.dat' index $i with linespoints lw 2 title 'chapter $name'"
    i=$((i + 1))
  done < <(sed -n 's/^# //p' "$DIR/bleu_by_length.dat")
  (cd "$DIR" && gnuplot -e "set terminal pngcairo size 900,500; set output 'bleu_by_length.png';
    set title 'English -> Spanish, the test verses: BLEU by the length of the source';
    set xlabel 'English words in the source'; set ylabel 'BLEU';
    set xtics ('1-10' 5.5, '11-20' 15.5, '21-30' 25.5, '31-40' 35.5, '41+' 45.5);
    set xrange [0:51]; set yrange [0:*]; set key below; set grid ytics; plot $plot")
  echo "translate_compare.sh: $DIR/bleu_by_length.png"
fi
echo "translate_compare.sh: $(( $(date +%s) - start )) s"
