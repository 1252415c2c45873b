#!/usr/bin/env bash
# test_doc_names.sh - tools/doc_check.py's name check: every backticked snake_case name in the texts'
# prose is one the code or the scripts have (a function renamed in the code, and not in its reading
# guide, fails); a planted text with a name the code lacks is caught, and the lecture's notation passes.
#
#   bash tests/test_doc_names.sh [BUILD]     (tests/run_all.sh runs it; BUILD is not used)
#
# Reported in cmocka's words so tests/run_all.sh counts them.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ok()   { echo "[       OK ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }
names() {   # README...: the unknown names, one "path:line name" a line
  (cd "$root" && /usr/bin/python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "tools")
import doc_check
words = doc_check.code_words()
for readme in sys.argv[1:] or doc_check.readmes():
    for n, name in doc_check.unknown_names(readme, words):
        print("%s:%d %s" % (readme, n, name))
PY
  )
}

echo "[ RUN      ] every_text_names_what_the_code_has"
out=$(names)
if [ -n "$out" ]; then fail every_text_names_what_the_code_has "$out"; else ok every_text_names_what_the_code_has; fi

echo "[ RUN      ] a_renamed_function_is_caught"
stale="rnn_seq2seq_train_step_v$((6 * 7))"   # built here, so that no tracked file holds the name
printf 'Read `rnn_seq2seq_train_step`, then `%s()`; the score `f_att`, `o_t`.\n' "$stale" > "$work/t.md"
out=$(names "$work/t.md")
if [ "$out" != "$work/t.md:1 $stale()" ]; then
  fail a_renamed_function_is_caught "expected only the v0 name, got: $out"
else ok a_renamed_function_is_caught; fi

if [ "$failed" -gt 0 ]; then echo "[  FAILED  ] $failed test(s)."; fi
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ]
