#!/usr/bin/env bash
# seed_runs.sh - sourced by the three-seed experiment scripts (gpt_mlp.sh, attention_quality.sh, vit_norms.sh,
# vit_linformer.sh), after tools/lanes.sh and tools/reuse_run.sh: one model's runs at seeds 1, 2 and 3.
#
#   seed_runs DIR PROGRAM FLAGS...
#
# For each seed K: DIR/seedK/results.json of the same settings is reused (reuse_run says so), else
# ./$BUILD/PROGRAM FLAGS --seed K --threads $THREADS --quiet --out DIR/seedK starts in a lane, its output in
# DIR/seedK.log. The caller waits for the lanes (lanes_wait) and prints the table.
seed_runs() {
  local dir=$1 program=$2; shift 2
  local seed
  mkdir -p "$dir"
  for seed in 1 2 3; do
    if reuse_run "$dir/seed$seed" "$@" --seed "$seed"; then continue; fi
    lane "${dir#"$OUT"/*/}/seed$seed" "$dir/seed$seed.log" "./$BUILD/$program" "$@" --seed "$seed" \
      --threads "$THREADS" --quiet --out "$dir/seed$seed"
  done
}
