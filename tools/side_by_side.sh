#!/usr/bin/env bash
# side_by_side.sh - the runs that put a chapter's idea beside the one before it on the same data, which the
# chapters' own quick defaults do not already make (make run calls it after the chapters; the table is
# `tools/readme_tables.py --print side-by-side`):
#   01, 02, 03 on reverse 5-40 (a fixed context, additive attention, the dot-product layer; the same steps and
#                batch, chapter 01 at S = 96, E = 32 for about chapter 02's parameters), and 03 in chapter 02's
#                placement (the query is the previous state, the context feeds the next: chapter 03's README),
#   07_caption --model pool (the captioner without attention, beside make run's attend).
# The others come from the chapters' own runs: 04's positions against none, 05's heads at equal width, 06 and
# 02 on dates, the GPT against its n-gram baselines, 07's ViT against 07_mlp (an MLP on the pixels) and 07_cnn (a CNN).
#
#   bash tools/side_by_side.sh            the runs above (BUILD=build OUT=out by default)
#   bash tools/side_by_side.sh --seeds    seeds 2 and 3 of every run the table reads, chapters' runs included,
#                                         into OUT/NAME/seeds/seedK/ (about twice make run's time): the spread
#                                         that decides "win" or "tie" (make run's own runs are seed 1)
# Every run is made anew, as make run's chapters are, into OUT/side_by_side/NAME (its command in command.txt there,
# its output in NAME.log beside it), apart from the folders the chapters' texts and questions use. LANES=2
# THREADS=1 runs two at a time on one thread each (tools/lanes.sh; make run does).
set -euo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-out}
THREADS=${THREADS:-}   # --threads for every run (make run: 1, two runs at a time); empty: the programs' default
source "$(dirname "$0")/lanes.sh"
SEEDS=""
case "${1:-}" in
  "") ;;
  --seeds) SEEDS="2 3" ;;
  *) echo "side_by_side: unknown argument '$1' (expected nothing or --seeds)" >&2; exit 2 ;;
esac
run() {   # NAME COMMAND...: ./$BUILD/COMMAND --out $OUT/NAME (with --seeds: each seed K into $OUT/NAME/seeds/seedK)
  local name=$1; shift
  if [ -n "$SEEDS" ]; then
    local k
    for k in $SEEDS; do one "$name/seeds/seed$k" "$@" --seed "$k"; done
  else
    one "$name" "$@"
  fi
}
one() {   # NAME COMMAND...: one run into $OUT/NAME, its command in command.txt there, its output in $OUT/NAME.log
  local name=$1 program=$2; shift 2
  local dir="$OUT/$name"
  local cmd=("./$BUILD/$program" "$@" ${THREADS:+--threads "$THREADS"} --out "$dir")
  mkdir -p "$dir"
  echo "${cmd[*]}" > "$dir/command.txt"
  lane "$name" "$dir.log" "${cmd[@]}"
}
# the longest first (LANES=2 keeps both lanes busy to the end)
[ -n "$SEEDS" ] || one side_by_side/03_reverse40_bahdanau 03_dot_product_attention --task reverse --min-len 5 --max-len 40 \
  --batch 32 --steps 2000 --placement bahdanau
run side_by_side/02_reverse40 02_bahdanau_attention --task reverse --min-len 5 --max-len 40 --batch 32 --steps 2000
run side_by_side/03_reverse40 03_dot_product_attention --task reverse --min-len 5 --max-len 40 --batch 32 --steps 2000
run side_by_side/07_caption_pool 07_caption --model pool
run side_by_side/01_reverse40 01_rnn_seq2seq --task reverse --min-len 5 --max-len 40 --state 96 --embed 32 --batch 32 --steps 2000
if [ -n "$SEEDS" ]; then   # the chapters' own quick defaults that the table reads
  for p in 02_bahdanau_attention 04_self_attention 05_multi_head_attention 06_transformer 06_gpt \
           07_vision_transformer 07_mlp 07_cnn 07_caption; do
    run "$p" "$p"
  done
fi
lanes_wait
