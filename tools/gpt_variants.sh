#!/usr/bin/env bash
# gpt_variants.sh - the lecture's variants of the transformer block, measured on chapter 06's GPT
# (the variants table of chapter 06's README).
#
#   bash tools/gpt_variants.sh            (or: make gpt-variants)
#
# Five runs of build/06_gpt on the Brown characters, each the chapter's model (4 blocks, D 128,
# 4 heads) on a short budget of its own, the flags of BUDGET below (context 128, 600 steps of 16
# windows, AdamW, seed 42; shorter than the quick default), with ONE switch changed:
#   baseline   pre-LN, LayerNorm, GELU MLP with F = 4 D = 512
#   post-ln    --norm post
#   rmsnorm    --norm-type rmsnorm
#   swiglu     --mlp swiglu --ff 341: three D x F matrices instead of two, so F = 2/3 of 512 gives
#              the same number of MLP parameters (Shazeer 2020; the lecture's Narang et al. table)
#   relu       --mlp relu
# one after another, each with --threads 1. Outputs OUT/gpt_variants/NAME/ (results.json: validation
# and test bits per character, train_seconds) and NAME.log; a run whose results.json exists with
# the same settings is reused, and said so (tools/reuse_run.sh), so an interrupted sweep resumes. Then the table:
#   /usr/bin/python3 tools/readme_tables.py --print gpt-variants
# Budgets can be changed from the environment (STEPS=50 for a smoke test); ONLY="swiglu relu" runs
# just those (two such sweeps side by side use the 2 cores, one thread each).
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
STEPS=${STEPS:-600}
# The sweep's budget, written out so that a change of the program's defaults leaves the table as measured.
BUDGET="--context 128 --batch 16 --lr 2e-3 --warmup 60 --weight-decay 0.1"
DIR="$OUT/gpt_variants"
NAMES="baseline post-ln rmsnorm swiglu relu"
for name in ${ONLY:-}; do
  [[ " $NAMES " == *" $name "* ]] || { echo "gpt_variants.sh: ONLY names '$name', expected some of: $NAMES" >&2; exit 2; }
done
mkdir -p "$DIR"
source "$(dirname "$0")/reuse_run.sh"

run() {
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  # shellcheck disable=SC2086 # BUDGET is several flags
  if reuse_run "$DIR/$name" --steps "$STEPS" $BUDGET "$@"; then return; fi
  echo "$name: $*"
  # shellcheck disable=SC2086 # BUDGET is several flags
  "./$BUILD/06_gpt" --steps "$STEPS" $BUDGET --threads 1 --quiet --out "$DIR/$name" "$@" > "$DIR/$name.log" 2>&1 ||
    { echo "$name failed; see $DIR/$name.log" >&2; exit 1; }
  grep -E "^GPT \(this run\)|^trained" "$DIR/$name.log" | sed 's/^/  /'
}

run baseline
run post-ln --norm post
run rmsnorm --norm-type rmsnorm
run swiglu --mlp swiglu --ff 341
run relu --mlp relu
