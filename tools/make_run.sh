#!/usr/bin/env bash
# make_run.sh - what `make run` does, in order: every chapter's programs on their quick defaults into
# out/NAME, the runs that put each idea beside the one before it (tools/side_by_side.sh), the translation
# runs (tools/translate_compare.sh), then the three tables. Runs go two at a time on one thread each
# (tools/lanes.sh: the bits do not depend on the thread count, and two small models use 2 cores better
# than one model on two threads); each run's output is printed whole when it ends.
#
#   bash tools/make_run.sh PROGRAM...     (the Makefile passes every program; BUILD=build OUT=out LANES=2 THREADS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
source tools/lanes.sh
[ $# -gt 0 ] || { echo "make_run.sh: no programs given (expected the names of build/'s programs)" >&2; exit 2; }
start=$(date +%s.%N)
chapter() {   # PROGRAM: its quick default into $OUT/PROGRAM
  lane "$1" "$OUT/$1.log" "./$BUILD/$1" --threads "$THREADS" --out "$OUT/$1"
}

# Chapter 05 first and alone, on every thread: it times attention's cost against the length
# (scaling_time.png), which a run beside it would slow.
for p in "$@"; do
  case "$p" in 05_*) lane "$p" "$OUT/$p.log" "./$BUILD/$p" --out "$OUT/$p"; lanes_wait ;; esac
done
# The longest runs first, so that both lanes stay busy to the end of each group (then every program
# not named here, in the Makefile's order); 06_gpt_genre last, once 06_gpt's checkpoint is written.
longest_first="06_gpt 06_transformer 07_vision_transformer 07_cnn 07_caption 02_bahdanau_attention 01_rnn_seq2seq"
gpt_run=""   # 06_gpt's run, which 06_gpt_genre (fine-tuning its checkpoint) waits for
for p in $longest_first; do
  case " $* " in *" $p "*) chapter "$p" ;; esac
  if [ "$p" = 06_gpt ] && [ "${#LANES_PIDS[@]}" -gt 0 ]; then gpt_run=${LANES_PIDS[-1]}; fi
done
for p in "$@"; do
  case "$p" in 05_*|06_gpt_genre) ;; *) case " $longest_first " in *" $p "*) ;; *) chapter "$p" ;; esac ;; esac
done
case " $* " in *" 06_gpt_genre "*)
  while [ -n "$gpt_run" ] && kill -0 "$gpt_run" 2> /dev/null; do lanes_reap; done
  chapter 06_gpt_genre ;;
esac
lanes_wait
BUILD=$BUILD OUT=$OUT bash tools/side_by_side.sh
BUILD=$BUILD OUT=$OUT CHAPTERS="06 02 01 03" bash tools/translate_compare.sh
echo; echo "All of make run: $(lanes_since "$start") s" \
  "($LANES runs at a time, $THREADS thread(s) each)"; echo

bash tools/results_table.sh $(for p in "$@"; do echo "$OUT/$p/results.json"; done)
echo; echo "Each idea beside the one before it, on the same data:"; echo
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print side-by-side
echo; echo "Translation, English -> Spanish ($OUT/translate/bleu_by_length.png):"; echo
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print translate
