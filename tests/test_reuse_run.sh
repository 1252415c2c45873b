#!/usr/bin/env bash
# test_reuse_run.sh - tools/reuse_run.sh, which the experiment scripts (length_ood.sh, gpt_moe.sh, ...)
# ask before training: a results.json of the same settings is reused and said so; one of other settings
# (the 3-step smoke test before a full run) is not, and the line says which setting differs; a file
# written before numbers were exact (%.6g) still matches.
#
#   bash tests/test_reuse_run.sh [BUILD]     (tests/run_all.sh runs it; BUILD is not used)
#
# Reported in cmocka's words so tests/run_all.sh counts them.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../tools/reuse_run.sh
source "$root/tools/reuse_run.sh"
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ok()   { echo "[       OK ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }

mkdir -p "$work/run"
printf '{\n  "task": "reverse",\n  "pos": "rope",\n  "steps": 3,\n  "lr": 0.003,\n  "seed": 42\n}\n' \
  > "$work/run/results.json"

echo "[ RUN      ] smoke_test_is_not_reused"
if out=$(reuse_run "$work/run" --task reverse --steps 2000 --pos rope); then
  fail smoke_test_is_not_reused "a 3-step run was reused for 2000 steps: $out"
elif ! grep -q "steps 3 there, 2000 now" <<<"$out"; then
  fail smoke_test_is_not_reused "no line naming the steps: $out"
else ok smoke_test_is_not_reused; fi

echo "[ RUN      ] same_settings_reused_and_said"
if ! out=$(reuse_run "$work/run" --task reverse --steps 3 --pos rope --lr 3e-3 --threads 1 --quiet); then
  fail same_settings_reused_and_said "the same settings were not reused: $out"
elif ! grep -q "reusing $work/run (task reverse, steps 3, pos rope, lr 3e-3" <<<"$out"; then
  fail same_settings_reused_and_said "no line saying so: $out"
else ok same_settings_reused_and_said; fi

echo "[ RUN      ] other_flag_not_reused"
if out=$(reuse_run "$work/run" --steps 3 --pos learned); then
  fail other_flag_not_reused "--pos learned reused a rope run: $out"
elif ! grep -q "pos rope there, learned now" <<<"$out"; then
  fail other_flag_not_reused "no line naming pos: $out"
else ok other_flag_not_reused; fi

echo "[ RUN      ] old_file_and_no_file"
printf '{\n  "parameters": 2.38541e+06,\n  "steps": 2000\n}\n' > "$work/run/results.json"
if ! reuse_run "$work/run" --steps 2000 >/dev/null; then fail old_file_and_no_file "an old file was not reused"
elif out=$(reuse_run "$work/none" --steps 2000) || [ -n "$out" ]; then
  fail old_file_and_no_file "a missing results.json: rc 0 or a line ($out)"
else ok old_file_and_no_file; fi

if [ "$failed" -gt 0 ]; then echo "[  FAILED  ] $failed test(s)."; fi
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ]
