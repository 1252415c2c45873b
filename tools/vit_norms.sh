#!/usr/bin/env bash
# vit_norms.sh - layer norm against batch norm (and RMSNorm) in chapter 07's ViT, the lecture's slide
# "layer normalization vs batch normalization" measured (the table "vit-norms" of chapter 06's SIZE.md).
#
#   bash tools/vit_norms.sh            (or: make vit-norms)
#
# The ViT's quick default (patches of 7, 2 blocks of D 64, 5000 steps) with --norm-type layernorm,
# rmsnorm and batchnorm, seeds 1, 2 and 3 each. Batch norm's statistics are taken over the batch and
# the tokens in training, its running averages in evaluation (common/nn/batchnorm.h). Two runs at a
# time on one thread each (tools/lanes.sh). Outputs OUT/vit_norms/NAME/seedK/ (results.json) and
# their .log; a run whose results.json has the same settings is reused, and said so
# (tools/reuse_run.sh). Then the table: /usr/bin/python3 tools/readme_tables.py --print vit-norms
# STEPS=20 is a smoke test (its runs are made again at the full budget next time).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-5000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
DIR="$OUT/vit_norms"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

for name in layernorm rmsnorm batchnorm; do
  seed_runs "$DIR/$name" 07_vision_transformer --steps "$STEPS" --norm-type "$name" --pictures 0
done
lanes_wait
echo "vit_norms: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print vit-norms
