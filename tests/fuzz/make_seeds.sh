#!/usr/bin/env bash
# make_seeds.sh - (re)write the seed corpora of the fuzz targets in tests/fuzz/NAME/.
#
#   bash tests/fuzz/make_seeds.sh [BUILD]      (after make; from the repository root)
#
# Seeds are valid files written by the programs themselves (a tiny run of each
# chapter for the checkpoints, chapter 07's input picture for PGM) or cut from
# the shipped data (CMUdict, Brown, Fashion-MNIST's IDX files), plus for each
# a truncated and a bit-flipped variant (tests/fuzz/variants.py). Files named
# regression-* (inputs that once crashed a loader) are never touched here.
set -eu   # (no pipefail: "zcat | head" ends zcat with SIGPIPE)
build=${1:-build}
here=tests/fuzz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variants() { /usr/bin/python3 "$here/variants.py" "$@"; }

# checkpoints: one per program, tiny sizes (the runs of tests/test_cli.c)
rm -f "$here"/checkpoint/seed-*
q="--quiet"
"$build/01_rnn_seq2seq" --steps 1 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/01" >/dev/null
"$build/02_bahdanau_attention" --steps 1 --state 8 --embed 4 --attn 4 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/02" >/dev/null
"$build/03_dot_product_attention" --steps 1 --state 8 --embed 4 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/03" >/dev/null
"$build/04_self_attention" --task reverse --pos learned --steps 1 --dim 8 --ff 8 --layers 1 --batch 8 --test-size 5 $q --out "$tmp/04" >/dev/null
"$build/05_multi_head_attention" --task neighbours --heads 2 --steps 1 --dim 8 --ff 8 --batch 8 --test-size 5 --scale-max-len 0 $q --out "$tmp/05" >/dev/null
"$build/06_transformer" --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/06" >/dev/null
"$build/06_gpt" --tokens char --steps 1 --layers 1 --dim 8 --heads 2 --ff 8 --context 8 --batch 2 --eval-every 0 --eval-max-tokens 50 --max-new 2 $q --out "$tmp/gpt" >/dev/null
"$build/06_transformer" --task reverse --min-len 3 --max-len 6 --pos learned --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/06-learned" >/dev/null
"$build/06_gpt" --tokens char --mlp moe --experts 2 --moe-top-k 2 --capacity 1.5 --pos rope --steps 1 --layers 1 --dim 8 --heads 2 --ff 8 --context 8 --batch 2 --eval-every 0 --eval-max-tokens 50 --max-new 2 $q --out "$tmp/gpt-moe" >/dev/null
"$build/06_gpt" --tokens char --sparse 2,1,1,1 --steps 1 --layers 1 --dim 8 --heads 2 --ff 8 --context 8 --batch 2 --eval-every 0 --eval-max-tokens 50 --max-new 2 $q --out "$tmp/gpt-sparse" >/dev/null
"$build/07_vision_transformer" --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 4 --test-size 5 --pictures 0 $q --out "$tmp/07" >/dev/null
# batch norm: the running statistics after the tensors (enc./dec.running_mean, _var)
"$build/06_transformer" --norm-type batchnorm --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --n-train 50 --max-eval 5 --samples 0 $q --out "$tmp/06-bn" >/dev/null
"$build/07_vision_transformer" --norm-type batchnorm --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 4 --test-size 5 --pictures 0 $q --out "$tmp/07-bn" >/dev/null
"$build/07_cnn" --steps 1 --filters 2 --batch 4 --test-size 5 $q --out "$tmp/07-cnn" >/dev/null
# Linformer: E, F [k, T] among the encoder's tensors, linformer=k in the config
"$build/07_vision_transformer" --linformer 3 --steps 1 --dim 8 --heads 2 --ff 8 --layers 1 --patch 14 --batch 4 --test-size 5 --pictures 0 $q --out "$tmp/07-lin" >/dev/null
"$build/07_caption" --steps 1 --batch 4 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --pictures 0 --dim 8 --heads 2 --ff 8 --layers 1 --embed 4 --state 8 --attn 4 --patch 14 --threads 1 $q --out "$tmp/cap" >/dev/null
# the captioner with the CNN encoder: encoder=cnn, filters=F in the config, conv1.*, conv2.*, proj.* tensors
"$build/07_caption" --encoder cnn --filters 2 --steps 1 --batch 4 --train-scenes 10 --valid-scenes 2 --test-scenes 2 --pictures 0 --dim 8 --heads 2 --ff 8 --embed 4 --state 8 --attn 4 --threads 1 $q --out "$tmp/cap-cnn" >/dev/null
# the genre model on the tiny GPT above: model=ch06_gpt_genre, the GPT's lines and tensors, then head.*
"$build/06_gpt_genre" --gpt "$tmp/gpt/model.ckpt" --runs finetune --per-genre 1 --steps 1 --batch 2 --eval-every 0 --test-size 15 $q --out "$tmp/genre" >/dev/null
cp "$tmp"/genre/model_finetune.ckpt "$here/checkpoint/seed-genre.ckpt"
for d in 01 02 03 06 06-learned 06-bn gpt gpt-moe gpt-sparse cap cap-cnn; do cp "$tmp/$d/model.ckpt" "$here/checkpoint/seed-$d.ckpt"; done
cp "$tmp"/04/model_*.ckpt "$here/checkpoint/seed-04.ckpt"
cp "$tmp"/05/model_*.ckpt "$here/checkpoint/seed-05.ckpt"
cp "$tmp"/07/model_*.ckpt "$here/checkpoint/seed-07.ckpt"
cp "$tmp"/07-bn/model_*.ckpt "$here/checkpoint/seed-07-bn.ckpt"
cp "$tmp"/07-lin/model_*.ckpt "$here/checkpoint/seed-07-lin.ckpt"
cp "$tmp"/07-cnn/model_*.ckpt "$here/checkpoint/seed-07-cnn.ckpt"
variants "$here"/checkpoint/seed-0[1-7].ckpt "$here"/checkpoint/seed-06-learned.ckpt "$here"/checkpoint/seed-06-bn.ckpt \
  "$here"/checkpoint/seed-07-bn.ckpt "$here"/checkpoint/seed-07-lin.ckpt "$here"/checkpoint/seed-07-cnn.ckpt \
  "$here"/checkpoint/seed-gpt.ckpt \
  "$here"/checkpoint/seed-gpt-moe.ckpt "$here"/checkpoint/seed-gpt-sparse.ckpt "$here"/checkpoint/seed-cap.ckpt \
  "$here"/checkpoint/seed-cap-cnn.ckpt "$here"/checkpoint/seed-genre.ckpt

# PGM: the 28 x 28 picture chapter 07 writes for a test image, and a P2 one
rm -f "$here"/pgm/seed-*
"$build/07_vision_transformer" --load "$tmp"/07/model_*.ckpt --index 3 --pictures 0 --out "$tmp/e07" >/dev/null
cp "$tmp"/e07/input_*.pgm "$here/pgm/seed-p5.pgm"
printf 'P2\n# a comment\n3 2\n15\n0 5 10\n15 7 1\n' >"$here/pgm/seed-p2.pgm"
printf 'P5 2 2 65535\n\001\002\003\004\377\377\000\000' >"$here/pgm/seed-p5-16bit.pgm"
variants "$here"/pgm/seed-p5.pgm "$here"/pgm/seed-p2.pgm

# IDX (first byte of a seed: the target's mode, tests/fuzz/fuzz_idx.c):
# 3 images and 3 labels from Fashion-MNIST, raw (odd mode byte)
rm -f "$here"/idx/seed-*
fm=/usr/share/datasets/fashion-mnist
/usr/bin/python3 - "$fm" "$here/idx" <<'PY'
import gzip, struct, sys
fm, out = sys.argv[1], sys.argv[2]
img = gzip.open(fm + "/t10k-images-idx3-ubyte.gz").read(16 + 3 * 784)
lab = gzip.open(fm + "/t10k-labels-idx1-ubyte.gz").read(8 + 3)
img = img[:4] + struct.pack(">I", 3) + img[8:]
lab = lab[:4] + struct.pack(">I", 3) + lab[8:]
open(out + "/seed-images-any", "wb").write(bytes([1]) + img)       # raw, any size
open(out + "/seed-images-28", "wb").write(bytes([3]) + img)        # raw, 28 x 28
open(out + "/seed-labels", "wb").write(bytes([5]) + lab)           # raw, labels
open(out + "/seed-labels-gz", "wb").write(bytes([4]) + lab)        # to be gzip'd, labels
PY
variants "$here"/idx/seed-images-28 "$here"/idx/seed-labels

# CMUdict: its first lines and some alternates (mode byte 0: gzip'd by the target)
rm -f "$here"/cmudict/seed-*
{ printf '\000'; zcat data/cmudict.dict.gz | head -n 40; printf 'ABDOMEN  AE0 B D OW1 M AH0 N\nABDOMEN(1)  AE1 B D AH0 M AH0 N\n# comment\n\n'; } >"$here/cmudict/seed-head"
{ printf '\001'; zcat data/cmudict.dict.gz | sed -n '1000,1030p'; } >"$here/cmudict/seed-raw"
variants "$here"/cmudict/seed-head

# Brown: the first sentences of the corpus (byte 0: gzip'd words view; byte 1: split)
rm -f "$here"/brown/seed-*
{ printf '\000\021'; zcat data/brown.txt.gz | head -n 12; } >"$here/brown/seed-words"
{ printf '\002\003'; zcat data/brown.txt.gz | head -n 6; } >"$here/brown/seed-chars"
variants "$here"/brown/seed-words

# typed text: --translate, --input, --prompt
rm -f "$here"/text/seed-*
for s in "March 3, 2021" "tuesday 03/08/1987" "abcdefg" "HELLO" "o'neil-smith" "3 1 4 1 5 9 2 6" "31415926" \
         "3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3" "The jury said ." "The Fulton County" ""; do
  n=$(ls "$here"/text | wc -l)
  printf '%s' "$s" >"$here/text/seed-$n"
done

# flags: NUL-separated, the first piece a preset
rm -f "$here"/args/seed-*
printf -- '--task g2p --steps 40\000--steps\00012\000--lr=0.1\000--quiet\000--out\000x' >"$here/args/seed-1"
printf -- '\000--task\000reverse\000--clip\0001e3\000--batch=4096\000--label-smoothing\000-0.5' >"$here/args/seed-2"
printf -- '--bogus\000--help' >"$here/args/seed-3"
echo "seeds written: $(find "$here" -mindepth 2 -type f -name 'seed-*' | wc -l) files"
