#!/usr/bin/env bash
# caption_encoders.sh - which features the captioner's decoder should attend to (the table
# "caption-encoders" and the picture of chapter 07's CAPTION.md): the ViT encoder trained from scratch
# with the captioner, against the CNN's grid of features (07_caption --encoder cnn) from scratch, from a
# CNN classifier trained first on single items (--pretrained) and fine-tuned, or kept frozen
# (--freeze-encoder): the lecture's pipeline, a pretrained CNN's spatial features under attention.
#
#   bash tools/caption_encoders.sh        (or: make caption-encoders)
#
# For each seed K of 1, 2 and 3: the pretraining, 07_cnn at its quick default (5000 steps of 128
# single 28 x 28 items, F = 8) with --seed K, into OUT/caption_encoders/pretrain/seedK; then the four
# captioners at 07_caption's quick default (model 2, the GRU decoder with additive attention, 1500
# steps of 32 scenes of 2 x 2 items) with --seed K, the pretrained ones starting from seed K's CNN:
# 15 runs, two at a time on one thread each (tools/lanes.sh), about 12 minutes on 2 cores. Outputs
# OUT/caption_encoders/ENCODER/seedK/ (results.json, the per-word panels caption_test*.png) and their
# .log; a run whose results.json has the same settings is reused, and said so (tools/reuse_run.sh).
# Then the table (/usr/bin/python3 tools/readme_tables.py --print caption-encoders).
# STEPS=20 is a smoke test of the captioners (the pretraining too: CNN_STEPS=20).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-1500}
CNN_STEPS=${CNN_STEPS:-5000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
DIR="$OUT/caption_encoders"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

# 1. the pretraining: one CNN classifier per seed, seed K's into pretrain/seedK
seed_runs "$DIR/pretrain" 07_cnn --steps "$CNN_STEPS" --filters 8
lanes_wait

# 2. the four captioners per seed, the pretrained ones from that seed's CNN
cnn="$DIR/pretrain/seed{seed}/model_cnn.ckpt"
seed_runs "$DIR/vit" 07_caption --steps "$STEPS" --encoder vit
seed_runs "$DIR/cnn-scratch" 07_caption --steps "$STEPS" --encoder cnn --filters 8
seed_runs "$DIR/cnn-finetuned" 07_caption --steps "$STEPS" --encoder cnn --filters 8 --pretrained "$cnn"
seed_runs "$DIR/cnn-frozen" 07_caption --steps "$STEPS" --encoder cnn --filters 8 --pretrained "$cnn" --freeze-encoder
lanes_wait
echo "caption_encoders: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print caption-encoders
