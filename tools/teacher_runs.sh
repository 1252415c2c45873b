#!/usr/bin/env bash
# teacher_runs.sh - the runs the coursework sheets' questions name, for the model answers'
# tables in tests/coursework/TEACHER.md (tools/teacher_tables.py reads them).
#
#   bash tools/teacher_runs.sh          (or: make teacher-runs), then make readme
#
# One run after another, each the command of tests/coursework/sheets/NN_*.md's "Questions" with
# its --out moved under OUT/teacher/ (OUT/teacher/01_q1, ...), with the binaries of BUILD (default
# build). Each folder gets command.txt (the command) and log.txt (what it printed). A run whose
# command.txt holds the same command and whose result file is there is reused (and says so);
# any other is run again. Questions about `make run`'s own outputs read OUT/NN_*/ (never written
# here); a run that loads one of its checkpoints is skipped, with a message, until it exists.
# Under an hour on 2 idle cores, most of it chapter 06's norm experiment and chapter 07.
# Exits 1 when a run failed or was skipped.
set -uo pipefail

BUILD=${BUILD:-build}
OUT=${OUT:-out}
DIR="$OUT/teacher"
mkdir -p "$DIR" || exit 1
start=$(date +%s)
failed=0

# run NAME RESULT PROGRAM FLAGS...: ./BUILD/PROGRAM FLAGS --out DIR/NAME, unless already made;
# RESULT is the file (in DIR/NAME) that the finished run leaves (results.json for training runs).
run() {
  local name=$1 result=$2 program=$3
  shift 3
  local dir="$DIR/$name"
  local cmd=$program a                     # command.txt: the same for any BUILD, quoted where needed
  for a in "$@" --out "$dir"; do
    case "$a" in *[!A-Za-z0-9_./,=:+-]* | '') cmd="$cmd \"$a\"" ;; *) cmd="$cmd $a" ;; esac
  done
  if [ -f "$dir/$result" ] && [ -f "$dir/log.txt" ] && [ "$(cat "$dir/command.txt" 2>/dev/null)" = "$cmd" ]; then
    echo "$name: reused ($dir/command.txt: same command, $dir/$result there)"
    return 0
  fi
  local need
  for need in "$@"; do
    case "$need" in
      "$OUT"/[0-9][0-9]_*/*.ckpt)
        if [ ! -f "$need" ]; then
          echo "$name: skipped: $need not found (make run writes it)" >&2
          failed=1
          return 0
        fi ;;
    esac
  done
  mkdir -p "$dir" || { failed=1; return 0; }
  rm -f "$dir/$result" "$dir/command.txt" "$dir/log.txt"
  local stopped
  for stopped in "$dir"/*_so_far.ckpt; do   # this script's own run, stopped: it starts again from scratch
    [ -f "$stopped" ] && { echo "$name: removing $stopped (a stopped run of this script; training again)"; rm -f "$stopped"; }
  done
  echo "$name: ./$BUILD/$cmd"
  local t0
  t0=$(date +%s)
  if ./"$BUILD"/"$program" "$@" --out "$dir" > "$dir/log.part" 2>&1 && mv "$dir/log.part" "$dir/log.txt" \
      && [ -f "$dir/$result" ]; then
    printf '%s\n' "$cmd" > "$dir/command.txt"
    echo "$name: $(( $(date +%s) - t0 )) s"
  else
    echo "$name: failed (or left no $result); see $dir/log.part or log.txt" >&2
    failed=1
  fi
}

B=$OUT   # make run's folders, read (the loads) but never written

# The five runs whose figures the old answers got wrong come first.
# 01 Q1: reverse 5-40 through the bottleneck; Q2: plain RNN against GRU on dates.
run 01_q1 results.json 01_rnn_seq2seq --task reverse --min-len 5 --max-len 40 --state 96 --steps 2000
run 01_q2_rnn results.json 01_rnn_seq2seq --cell rnn
run 01_q2_gru results.json 01_rnn_seq2seq --cell gru
# 03 Q1: the scaling table alone; Q2: training without and with 1/sqrt(D) at S = 256.
run 03_q1 scaling_entropy.dat 03_dot_product_attention --scaling-experiment
run 03_q2_dot results.json 03_dot_product_attention --score dot --state 256 --steps 1000
run 03_q2_scaled results.json 03_dot_product_attention --score scaled_dot --state 256 --steps 1000
# 07 Q1: the patch-size table; Q2: one change at a time from the default, at Q1's 1000 steps.
run 07_q1 results.json 07_vision_transformer --patch 14,7,4 --steps 1000 --pictures 0
run 07_q2_learned results.json 07_vision_transformer --steps 1000
run 07_q2_sin2d results.json 07_vision_transformer --pos sinusoidal2d --steps 1000 --pictures 0
run 07_q2_mean results.json 07_vision_transformer --pool mean --steps 1000 --pictures 0

# 01 Q3: Q1's model decoded with a beam of 5.
run 01_q3 results.json 01_rnn_seq2seq --load "$DIR/01_q1/model.ckpt" --beam 5
# 02 Q1: attention against chapter 01 at the same sizes; Q2: a date's heatmap; Q3: bidirectional.
run 02_q1_attn results.json 02_bahdanau_attention --task reverse --min-len 5 --max-len 40 --batch 32 --steps 2000
run 02_q1_rnn results.json 01_rnn_seq2seq --task reverse --min-len 5 --max-len 40 --state 96 --embed 32 --batch 32 --steps 2000
run 02_q2 log.txt 02_bahdanau_attention --load "$B/02_bahdanau_attention/model.ckpt" --translate "21 Nov 2026" --plot
run 02_q3_bi results.json 02_bahdanau_attention --task g2p --state 96 --embed 48 --attn 48 --steps 2500 --bidirectional
run 02_q3_uni results.json 02_bahdanau_attention --task g2p --state 96 --embed 48 --attn 48 --steps 2500
# 03 Q3: the time per step of the additive and the scaled dot score.
run 03_q3_additive results.json 03_dot_product_attention --score additive --steps 300
run 03_q3_scaled results.json 03_dot_product_attention --score scaled_dot --steps 300
# 04 Q2: reverse under a causal mask.
run 04_q2 results.json 04_self_attention --task reverse --pos sinusoidal --causal
# 05 Q1: the 2-head model's heads; Q3: the fused kernel in training.
run 05_q1 log.txt 05_multi_head_attention --load "$B/05_multi_head_attention/model_count_next_h2.ckpt" --input "3 1 4 1 5 9 2 6" --plot
run 05_q3 results.json 05_multi_head_attention --attention fused
# 06 Q2: temperature and top-k; Q3: the KV cache.
for t in 0.2 1.0 1.5; do
  run "06_q2_t$t" log.txt 06_gpt --load "$B/06_gpt/model.ckpt" --prompt "The jury said" --temperature "$t" --top-k 0
done
run 06_q2_t1.0_k5 log.txt 06_gpt --load "$B/06_gpt/model.ckpt" --prompt "The jury said" --temperature 1.0 --top-k 5
run 06_q3_cache log.txt 06_gpt --load "$B/06_gpt/model.ckpt" --prompt "The jury said" --max-new 300
run 06_q3_nocache log.txt 06_gpt --load "$B/06_gpt/model.ckpt" --prompt "The jury said" --max-new 300 --no-kv-cache
# 06 Q1: post-LN against pre-LN at depth 2, 6, 12 (the longest run, last).
run 06_q1 norm_experiment.json 06_transformer --norm-experiment

echo "teacher runs: $(( $(date +%s) - start )) s in all; now: make readme"
exit "$failed"
