#!/usr/bin/env bash
# make.sh - how the checkpoints in this folder were made: each program of an
# older build trains a tiny model for a few hundred steps at most, then the
# same build evaluates it with --load; the lines that carry its figures go to
# expected.txt, which tests/test_old_checkpoints.c checks against today's
# programs.
#
#   bash tests/data/old_checkpoints/make.sh OLD_BUILD     (from the repository's top folder)
#
# OLD_BUILD is the build folder of the commit whose checkpoint format is kept
# (README.md says which). Writes *.ckpt and expected.txt here, overwriting them.
set -euo pipefail
old=${1:?usage: make.sh OLD_BUILD}
here=tests/data/old_checkpoints
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
expected="$here/expected.txt"
cat > "$expected" <<'EOF'
# The figures of each checkpoint here, as the build that wrote it printed them
# (make.sh). tests/test_old_checkpoints.c runs each "$ PROGRAM FLAGS" line
# from the repository's top folder as BUILD/PROGRAM FLAGS --out TMP and wants
# exit 0 and every line below it in its standard output (runs of spaces
# count as one space).
EOF

# train NAME PROGRAM FLAGS...: train with the old build; the checkpoint becomes NAME.ckpt
train() {
  local name=$1 program=$2; shift 2
  echo "=== $name: $program $*"
  "$old/$program" "$@" --out "$work/$name" --quiet > "$work/$name.log"
  cp "$work/$name"/*.ckpt "$here/$name.ckpt"
}

# record PATTERN PROGRAM FLAGS...: evaluate with the old build; the command and
# the lines of its output that match PATTERN (grep -E) go to expected.txt
record() {
  local pattern=$1 program=$2; shift 2
  local out
  out=$("$old/$program" "$@" --out "$work/eval")
  local line="\$ $program" arg
  for arg in "$@"; do   # as a shell reads it: an argument with spaces in double quotes
    case "$arg" in *" "*) line+=" \"$arg\"" ;; *) line+=" $arg" ;; esac
  done
  { echo; echo "$line"; grep -E "$pattern" <<<"$out"; } >> "$expected"
}

seq2seq=(--max-eval 50 --samples 0 --quiet)
date_text="12th of Feb. 2042"
for program in 01_rnn_seq2seq 02_bahdanau_attention 03_dot_product_attention; do
  train "$program" "$program" --embed 8 --hidden 24 --steps 200 --lr 0.01 --batch 32 --eval-every 200 --max-eval 50 --samples 0
  record "exact match|token accuracy" "$program" --load "$here/$program.ckpt" "${seq2seq[@]}"
  record " -> " "$program" --load "$here/$program.ckpt" --translate "$date_text" --quiet
done

train 04_self_attention 04_self_attention --task reverse --pos learned --dim 16 --ff 32 --layers 1 --steps 40 --lr 0.01 --test-size 200
record "test examples of" 04_self_attention --load "$here/04_self_attention.ckpt" --test-size 200 --quiet
record "^  output" 04_self_attention --load "$here/04_self_attention.ckpt" --input "3 1 4 1 5 9 2 6" --quiet

train 05_multi_head_attention 05_multi_head_attention --heads 2 --dim 16 --ff 32 --layers 1 --steps 200 --lr 0.01 --test-size 200 --scale-max-len 0
record "test examples of" 05_multi_head_attention --load "$here/05_multi_head_attention.ckpt" --test-size 200 --quiet
record "^  output" 05_multi_head_attention --load "$here/05_multi_head_attention.ckpt" --input "3 1 4 1 5 9 2 6" --quiet

train 06_transformer 06_transformer --layers 1 --dim 16 --heads 2 --ff 32 --steps 200 --lr 0.01 --batch 32 --eval-every 200 --max-eval 50 --samples 0
record "exact match|token accuracy" 06_transformer --load "$here/06_transformer.ckpt" "${seq2seq[@]}"
record " -> " 06_transformer --load "$here/06_transformer.ckpt" --translate "$date_text" --quiet

# 06_gpt's --load measures the whole test split (seconds); its sampled text is the figure here
train 06_gpt 06_gpt --layers 1 --dim 16 --heads 2 --ff 32 --context 16 --steps 1000 --lr 0.01 --batch 8 --warmup 10 \
  --eval-every 1000 --eval-tokens 2000 --final-valid-tokens 2000 --eval-max-tokens 2000
record "^  \[" 06_gpt --load "$here/06_gpt.ckpt" --prompt "The jury said" --temperature 0.8 --max-new 60 --seed 42
record "^  \[" 06_gpt --load "$here/06_gpt.ckpt" --prompt "The jury said" --temperature 0 --max-new 40

# 07_vision_transformer's --load measures all 15,000 validation and test images; --index 3 classifies one
train 07_vision_transformer 07_vision_transformer --patch 7 --layers 1 --dim 16 --heads 2 --ff 32 --steps 100 --batch 32 \
  --test-size 500 --pictures 0
record "^ +[0-9]\. " 07_vision_transformer --load "$here/07_vision_transformer.ckpt" --index 3 --quiet

for model in attend transformer pool; do
  train "07_caption_$model" 07_caption --model "$model" --patch 7 --dim 16 --layers 1 --heads 2 --ff 32 --embed 8 --hidden 16 \
    --attn 8 --train-scenes 500 --valid-scenes 50 --test-scenes 100 --steps 300 --lr 0.005 --eval-every 300 --pictures 0 \
    --samples 0 --max-eval 100
  record "exact match|token accuracy" 07_caption --load "$here/07_caption_$model.ckpt" --max-eval 100 --samples 0 --pictures 0 --quiet
done
ls -l "$here"/*.ckpt
