#!/usr/bin/env bash
# test_model_size.sh - tools/model_size.c, the size table of chapter 06's GPT.md: its formula gives
# gpt_create's own parameter count for every kind of block (norms, MLPs, positions, experts), and
# the lecture's three lines come out within rounding of its counts (213M, 1.5B, 175B; GPT-2's 1.5B
# is the paper's 1,542M rounded down, and the released model has 1,558M: 5% there); a bad --gpt is one
# clear error, exit 2.
#
#   bash tests/test_model_size.sh BUILD     (tests/run_all.sh runs it)
#
# Reported in cmocka's words so tests/run_all.sh counts them.
set -u
build=${1:-build}
tool="$build/tools/model_size"
passed=0 failed=0
ok()   { echo "[       OK ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }

echo "[ RUN      ] formula_equals_gpt_create"
if ! out=$("$tool" --check 2>&1); then fail formula_equals_gpt_create "$out"
elif [ "$(grep -c ': same$' <<<"$out")" -ne 8 ]; then fail formula_equals_gpt_create "not 8 configs the same: $out"
else ok formula_equals_gpt_create; fi

echo "[ RUN      ] the_lectures_three_lines"
out=$("$tool")
bad=""
while read -r name want tol; do   # the row's parameters (column 5) against the lecture's count
  got=$(awk -F' [|] ' -v n="$name" 'index($1, n) { print $4 }' <<<"$out")
  awk -v g="$got" -v w="$want" -v t="$tol" 'function v(x) { u = substr(x, length(x)); x = substr(x, 1, length(x) - 1);
      return x * (u == "B" ? 1e9 : u == "M" ? 1e6 : u == "T" ? 1e12 : 1) }
      BEGIN { d = v(g) / v(w) - 1; exit !(d <= t && d >= -t) }' || bad="$bad $name: $got against $want;"
done <<'ROWS'
Transformer 213M 0.01
GPT-2 1.5B 0.05
GPT-3 175B 0.01
ROWS
if [ -n "$bad" ]; then fail the_lectures_three_lines "$bad"; else ok the_lectures_three_lines; fi

echo "[ RUN      ] bad_config_is_one_clear_error"
out=$("$tool" --gpt 2 10 3 4 5 2>&1); rc=$?
if [ $rc -ne 2 ] || ! grep -q "D must be a multiple of H" <<<"$out"; then
  fail bad_config_is_one_clear_error "rc $rc: $out"
else ok bad_config_is_one_clear_error; fi

if [ "$failed" -gt 0 ]; then echo "[  FAILED  ] $failed test(s)."; fi
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ]
