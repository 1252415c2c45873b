#!/usr/bin/env bash
# vit_linformer.sh - full attention against Linformer in chapter 07's ViT (the table "vit-linformer" of
# chapter 06's COST.md): what projecting the tokens' keys and values to k rows costs in accuracy.
#
#   bash tools/vit_linformer.sh        (or: make vit-linformer)
#
# The ViT's quick default (patches of 7: 16 patches and the class token, T = 17 tokens; 2 blocks of
# D 64, 5000 steps) with full attention and with --linformer 8 and 4, seeds 1, 2 and 3 each. Two runs
# at a time on one thread each (tools/lanes.sh). Outputs OUT/vit_linformer/NAME/seedK/ (results.json)
# and their .log; a run whose results.json has the same settings is reused, and said so
# (tools/reuse_run.sh). Then the table: /usr/bin/python3 tools/readme_tables.py --print vit-linformer
# STEPS=20 is a smoke test (its runs are made again at the full budget next time).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-5000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
DIR="$OUT/vit_linformer"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

for k in 0 8 4; do
  name=$([ "$k" = 0 ] && echo full || echo "k$k")
  seed_runs "$DIR/$name" 07_vision_transformer --steps "$STEPS" --linformer "$k" --pictures 0
done
lanes_wait
echo "vit_linformer: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print vit-linformer
