#!/usr/bin/env bash
# attention_quality.sh - does the GPT need to see its whole context? Chapter 06's GPT with full,
# sliding-window and BigBird attention on two texts (the table "attention-quality" of chapter 06's
# COST.md): the Brown characters, where the last few dozen characters tell most of the next one, and
# the copy task of tools/copy_corpus.c, where half of the letters are a copy of the one 50 back.
#
#   bash tools/attention_quality.sh            (or: make attention-quality)
#
# Three models on each text, each the chapter's GPT (4 blocks, D 128) with rotary positions (a copy
# is an offset: rope learns it in a few hundred steps, learned positions took thousands), trained
# with seeds 1, 2 and 3 on one budget (BUDGET below: STEPS steps of 16 windows of 128 characters,
# AdamW; the final figures on the first 50000 validation and test characters, windows moved by 64,
# so each is predicted from at least 64 before it):
#   full      every position sees every earlier one (chapter 05's attention)
#   window    --sparse 16,1,0,0: blocks of 16, the query's own and the one before: 17 to 32 characters back
#   bigbird   --sparse 16,1,1,2: the window, the first block (global) and 2 random earlier blocks
# Two runs at a time on one thread each (tools/lanes.sh). Outputs OUT/attention_quality/TEXT/NAME/seedK/
# (results.json) and their .log; a run whose results.json has the same settings is reused, and said
# so (tools/reuse_run.sh). Then the table: /usr/bin/python3 tools/readme_tables.py --print attention-quality
# STEPS=20 is a smoke test (its runs are made again at the full budget next time).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-800}
export LANES=${LANES:-2} THREADS=${THREADS:-1}
# The budget, written out so that a change of the program's defaults leaves the table as measured.
BUDGET="--context 128 --batch 16 --pos rope --lr 2e-3 --warmup 100 --weight-decay 0.1 --eval-every 200 --eval-max-tokens 50000 --eval-stride 64 --max-new 60"
DIR="$OUT/attention_quality"
mkdir -p "$DIR"
source tools/lanes.sh
source tools/reuse_run.sh
source tools/seed_runs.sh
start=$(date +%s.%N)
COPY="$OUT/copy_task/copy.txt.gz"
[ -f "$COPY" ] || "./$BUILD/tools/copy_corpus" --out "$COPY"

run() {   # TEXT NAME FLAGS...: the three seeds of one model on one text
  local text=$1 name=$2; shift 2
  # shellcheck disable=SC2086 # BUDGET is several flags
  seed_runs "$DIR/$text/$name" 06_gpt --steps "$STEPS" $BUDGET "$@"
}

for text in copy brown; do
  data=()
  [ "$text" = copy ] && data=(--data "$COPY")
  run "$text" full --sparse none "${data[@]}"
  run "$text" window --sparse 16,1,0,0 "${data[@]}"
  run "$text" bigbird --sparse 16,1,1,2 "${data[@]}"
done
lanes_wait
echo "attention_quality: $(lanes_since "$start") s ($LANES runs at a time, $THREADS thread(s) each)"
/usr/bin/python3 tools/readme_tables.py --out "$OUT" --print attention-quality
