#!/usr/bin/env bash
# gpt_moe.sh - a mixture of experts against dense MLPs on chapter 06's GPT
# (the mixture-of-experts table of chapter 06's GPT.md).
#
#   bash tools/gpt_moe.sh            (or: make gpt-moe)
#
# Four runs of build/06_gpt on the Brown characters, the quick default (4 blocks, D 128, 4 heads,
# context 64, 2000 steps of 16 windows, seed 42) with the MLP changed:
#   dense      one GELU MLP, F = 512                     (the reference)
#   moe-k1     4 experts of F = 512, k = 1 (Switch)      equal ACTIVE parameters per token to dense
#   moe-k2     4 experts of F = 512, k = 2 (Mixtral's renormalised weights)
#   dense-4x   one GELU MLP, F = 2048                    equal TOTAL parameters to moe-k1 (less the router)
# one after another, --threads THREADS (default 2), aux coefficient 0.01, no capacity limit; the final figures on
# the first 100,000 validation and test characters. Outputs OUT/gpt_moe/NAME/ (results.json,
# moe_share.png: the share of each block's tokens each expert takes) and NAME.log; a run whose
# results.json exists with the same settings is reused, and said so (tools/reuse_run.sh).
# Prints the time it took. Then the table:
#   /usr/bin/python3 tools/readme_tables.py --print gpt-moe
# STEPS=50 for a smoke test.
set -euo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
THREADS=${THREADS:-2}
STEPS=${STEPS:-2000}
DIR="$OUT/gpt_moe"
mkdir -p "$DIR"
start=$(date +%s)
source "$(dirname "$0")/reuse_run.sh"

run() {
  local name=$1; shift
  if reuse_run "$DIR/$name" --steps "$STEPS" --eval-max-tokens 100000 "$@"; then return; fi
  echo "$name: $*"
  "./$BUILD/06_gpt" --steps "$STEPS" --threads "$THREADS" --quiet --eval-max-tokens 100000 --out "$DIR/$name" "$@" \
    > "$DIR/$name.log" 2>&1 || { echo "$name failed; see $DIR/$name.log" >&2; exit 1; }
  grep -E "^GPT \(this run\)|^trained|^mixture" "$DIR/$name.log" | sed 's/^/  /'
}

run dense
run moe-k1 --mlp moe --experts 4 --moe-top-k 1 --moe-aux 0.01
run moe-k2 --mlp moe --experts 4 --moe-top-k 2 --moe-aux 0.01
run dense-4x --ff 2048
echo "gpt_moe.sh: $(( $(date +%s) - start )) s"
