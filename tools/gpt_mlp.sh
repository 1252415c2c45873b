#!/usr/bin/env bash
# gpt_mlp.sh - why a block has an MLP after its attention, measured on chapter 06's GPT (the table
# "gpt-mlp" of chapter 06's SIZE.md).
#
#   bash tools/gpt_mlp.sh            (or: make gpt-mlp)
#
# Three models on the Brown characters, each trained with seeds 1, 2 and 3 on one budget (BUDGET below:
# 1000 steps of 16 windows of 64, AdamW; shorter than the quick default):
#   gelu       the chapter's model: 4 blocks of D 128, 4 heads, a GELU MLP of F = 4 D = 512
#   none       the same 4 blocks with --mlp none: attention only, a third of the parameters
#   none-deep  --mlp none with 12 blocks: attention only, as many parameters as gelu (4 D^2 a block
#              instead of 12 D^2), so the MLP's weights are spent on more attention instead
# Two runs at a time on one thread each (tools/lanes.sh). Outputs OUT/gpt_mlp/NAME/seedK/ (results.json)
# and their .log; a run whose results.json has the same settings is reused, and said so
# (tools/reuse_run.sh). Then the table: /usr/bin/python3 tools/readme_tables.py --print gpt-mlp
# STEPS=20 is a smoke test (its runs are made again at the full budget next time).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-1000}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
# The budget, written out so that a change of the program's defaults leaves the table as measured.
BUDGET="--context 64 --batch 16 --lr 2e-3 --warmup 100 --weight-decay 0.1 --eval-every 250"
DIR="$OUT/gpt_mlp"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)

run() {   # NAME FLAGS...: the three seeds of one model
  local name=$1; shift
  # shellcheck disable=SC2086 # BUDGET is several flags
  seed_runs "$DIR/$name" 06_gpt --steps "$STEPS" $BUDGET "$@"
}

run gelu --layers 4 --mlp gelu
run none --layers 4 --mlp none
run none-deep --layers 12 --mlp none
lanes_wait
echo "gpt_mlp: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print gpt-mlp
