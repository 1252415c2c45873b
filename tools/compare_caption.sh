#!/usr/bin/env bash
# compare_caption.sh - chapter 07's three captioners side by side at the same budget (the captioning
# table of chapter 07's README): the same encoder, scenes, steps, batch, learning rate and seed; only
# the decoder differs (--model pool, attend, transformer; caption.h).
#
#   bash tools/compare_caption.sh           (or: make caption-compare)
#   /usr/bin/python3 tools/readme_tables.py --print caption-07   the table (GRID 2, the default)
#
# Each run: ./build/07_caption --model M --grid GRID --steps STEPS --batch BATCH --threads THREADS,
# everything else the program's defaults (encoder P 7, D 64, 2 blocks, 4 heads, F 128; models 1-2 a
# GRU of S 64 with word embeddings of 32, model 2's D_A 32; model 3 one decoder block; 20,000
# training scenes, 2,000 test scenes; Adam, lr 2e-3, seed 42). The runs go one after another.
# Outputs: OUT/caption_compare/gGRID_M/ (results.json, model.ckpt, loss and accuracy plots, the
# panels of three test scenes) and OUT/caption_compare/gGRID_M.log. A run whose results.json exists
# with the same steps, batch and grid is reused, and said so (tools/reuse_run.sh; delete its
# directory to redo it). Budgets from the environment, e.g. a smoke test:
#   OUT=/tmp/cmp STEPS=20 bash tools/compare_caption.sh
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-4000}
BATCH=${BATCH:-32}
GRID=${GRID:-2}
THREADS=${THREADS:-2}
MODELS="pool attend transformer"

dir="$OUT/caption_compare"
mkdir -p "$dir"
source "$(dirname "$0")/reuse_run.sh"
[ -x "$BUILD/07_caption" ] || { echo "compare_caption: $BUILD/07_caption not found: run make all first" >&2; exit 1; }

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

start=$(now)
echo "compare_caption: --model $MODELS, --grid $GRID, $STEPS steps of $BATCH, $THREADS thread(s), into $dir/"
for m in $MODELS; do
  name="g${GRID}_$m"
  if reuse_run "$dir/$name" --grid "$GRID" --steps "$STEPS" --batch "$BATCH"; then continue; fi   # (--model: its own key)
  t0=$(now)
  cmd=("$BUILD/07_caption" --model "$m" --grid "$GRID" --steps "$STEPS" --batch "$BATCH" --threads "$THREADS"
       --quiet --out "$dir/$name")
  echo "  $name: ${cmd[*]}"
  if ! "${cmd[@]}" >"$dir/$name.log" 2>&1; then
    echo "compare_caption: $name failed; the last lines of $dir/$name.log:" >&2
    tail -n 5 "$dir/$name.log" >&2
    exit 1
  fi
  echo "  $name: $(seconds_since "$t0") s"
done
echo
echo "compare_caption: all runs $(seconds_since "$start") s of wall time"
echo
if [ "$GRID" = 2 ]; then
  /usr/bin/python3 "$(dirname "$0")/readme_tables.py" --out "$OUT" --print caption-07
fi
