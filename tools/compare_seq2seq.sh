#!/usr/bin/env bash
# compare_seq2seq.sh - chapters 01, 02, 03 and 06 side by side on the seq2seq tasks, with the same
# step budget and batch per task (the comparison table of chapter 06's README).
#
#   bash tools/compare_seq2seq.sh           (or: make compare)
#   /usr/bin/python3 tools/readme_tables.py --print compare-06 --print compare-06-length   the tables
#
# Every chapter trains with its own default model flags (01: GRU S 128; 02: GRU S 96, additive
# attention; 03: GRU S 128, scaled dot attention; 06: 2+2 pre-LN blocks, D 128, 4 heads, F 512, label
# smoothing 0.1) and the shared defaults (Adam, lr 3e-3, 100 warm-up steps, cosine decay, seed 42),
# one thread, on:
#   dates         1000 steps of 64 (DATES_STEPS, DATES_BATCH)
#   reverse 5-40  2000 steps of 32 (REVERSE_STEPS, REVERSE_BATCH; --min-len 5 --max-len 40)
#   reverse 5-80  the same budget (--min-len 5 --max-len 80)
#   g2p           2000 steps of 64 (G2P_STEPS, G2P_BATCH), greedy; then the same checkpoint decoded with
#                 a beam of 5 (--load ... --beam 5, into its own directory: the training run's files stay)
# Reverse uses batches of 32, as chapter 02's README does: its long sequences are the costly part.
# The runs go strictly one after another, each with --threads 1. Outputs: OUT/compare/NN_RUN/
# (results.json, model.ckpt, plots) and OUT/compare/NN_RUN.log, RUN one of dates, reverse40,
# reverse80, g2p, g2p_beam5. A run whose results.json exists with the same settings is reused, and
# said so (tools/reuse_run.sh; delete its directory to redo it), so an interrupted comparison
# resumes where it stopped; one of other settings is run again.
#
# Time: 31 minutes (1834 s of the runs' wall time) on the 2-core x86-64 machine of the READMEs, avx512
# backend, while other programs kept the other core busy; 39% of it is reverse 5-80 (chapter 06 alone took
# 581 s there, chapter 02 210 s; each chapter's runs in turn: 01 197 s, 02 333 s, 03 167 s, 06 1117 s).
# Every budget can be changed from the environment, e.g. a smoke test:
#   OUT=/tmp/cmp DATES_STEPS=20 REVERSE_STEPS=20 G2P_STEPS=20 bash tools/compare_seq2seq.sh
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
DATES_STEPS=${DATES_STEPS:-1000}
DATES_BATCH=${DATES_BATCH:-64}
REVERSE_STEPS=${REVERSE_STEPS:-2000}
REVERSE_BATCH=${REVERSE_BATCH:-32}
G2P_STEPS=${G2P_STEPS:-2000}
G2P_BATCH=${G2P_BATCH:-64}
CHAPTERS="01_rnn_seq2seq 02_bahdanau_attention 03_dot_product_attention 06_transformer"

dir="$OUT/compare"
mkdir -p "$dir"
source "$(dirname "$0")/reuse_run.sh"
for ch in $CHAPTERS; do
  [ -x "$BUILD/$ch" ] || { echo "compare_seq2seq: $BUILD/$ch not found: run make all first" >&2; exit 1; }
done

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run NN_RUN CHAPTER FLAGS...: one program, its output in $dir/NN_RUN.log, one line here.
run() {
  local name=$1 ch=$2
  shift 2
  if reuse_run "$dir/$name" "$@"; then return; fi
  local t0
  t0=$(now)
  echo "  $name: $BUILD/$ch $* --threads 1 --quiet --out $dir/$name"
  if ! "$BUILD/$ch" "$@" --threads 1 --quiet --out "$dir/$name" >"$dir/$name.log" 2>&1; then
    echo "compare_seq2seq: $name failed; the last lines of $dir/$name.log:" >&2
    tail -n 5 "$dir/$name.log" >&2
    exit 1
  fi
  echo "  $name: $(seconds_since "$t0") s"
}

start=$(now)
echo "compare_seq2seq: chapters $CHAPTERS, one run at a time, one thread each, into $dir/"
for ch in $CHAPTERS; do
  nn=${ch%%_*}
  echo "=== $ch"
  run "${nn}_dates" "$ch" --task dates --steps "$DATES_STEPS" --batch "$DATES_BATCH"
  run "${nn}_reverse40" "$ch" --task reverse --min-len 5 --max-len 40 --steps "$REVERSE_STEPS" --batch "$REVERSE_BATCH"
  run "${nn}_reverse80" "$ch" --task reverse --min-len 5 --max-len 80 --steps "$REVERSE_STEPS" --batch "$REVERSE_BATCH"
  run "${nn}_g2p" "$ch" --task g2p --steps "$G2P_STEPS" --batch "$G2P_BATCH"
  run "${nn}_g2p_beam5" "$ch" --load "$dir/${nn}_g2p/model.ckpt" --beam 5
done
echo
echo "compare_seq2seq: all runs $(seconds_since "$start") s of wall time"
echo
/usr/bin/python3 "$(dirname "$0")/readme_tables.py" --out "$OUT" --print compare-06 --print compare-06-length
