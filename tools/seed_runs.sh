#!/usr/bin/env bash
# seed_runs.sh - sourced by the three-seed experiment scripts (gpt_mlp.sh, attention_quality.sh, vit_norms.sh,
# vit_linformer.sh, vit_data_size.sh, caption_encoders.sh, gpt_genre.sh), after tools/lanes.sh and tools/reuse_run.sh: one
# model's runs at seeds 1, 2 and 3.
#
#   seed_runs DIR PROGRAM FLAGS...
#
# For each seed K: DIR/seedK/results.json of the same settings is reused (reuse_run says so), else
# ./$BUILD/PROGRAM FLAGS --seed K --threads $THREADS --quiet --out DIR/seedK starts in a lane, its output in
# DIR/seedK.log. In FLAGS, {seed} stands for K (caption_encoders.sh: each seed's own pretrained model). The
# caller waits for the lanes (lanes_wait) and prints the table.
seed_runs() {
  local dir=$1 program=$2; shift 2
  local seed flags
  mkdir -p "$dir"
  for seed in 1 2 3; do
    flags=("${@//\{seed\}/$seed}")
    if reuse_run "$dir/seed$seed" "${flags[@]}" --seed "$seed"; then continue; fi
    lane "${dir#"$OUT"/*/}/seed$seed" "$dir/seed$seed.log" "./$BUILD/$program" "${flags[@]}" --seed "$seed" \
      --threads "$THREADS" --quiet --out "$dir/seed$seed"
  done
}
