#!/usr/bin/env bash
# test_submissions.sh - the coursework's hand-in and gradebook end to end
# (make test-submissions; about two to three minutes, so not in make test):
#
#  - chapter 04's student tree is written and built once; make submit refuses
#    a tree that does not compile, with one line, and asks for a student id;
#  - made-up submissions of it are handed in with tools/coursework_submit.py:
#    complete, empty, partial (04.projections' forward written, its backward
#    not), not compiling, crashing (04.sinusoidal), looping (04.sinusoidal),
#    empty code with the grader edited to pass everything, the complete one
#    unpacked into a folder, a file that is no submission, and a tarball whose
#    file no longer matches its manifest;
#  - make grade-submissions grades the folder (hidden checks on, 10 s per
#    exercise) and each gradebook row must be the expected one: status, points,
#    first failure; every student has a feedback file.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
unset MAKEFLAGS MFLAGS MAKELEVEL
export CI= STRICT=
tmp=$(mktemp -d /tmp/attn_submissions_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/trees/04_self_attention
subs=$tmp/subs
mkdir -p "$subs"
fail() { echo "test_submissions: FAIL: $*"; exit 1; }

echo "== the student tree, built once"
/usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/trees" >/dev/null
[ -f "$tree/ANSWERS.md" ] || fail "the tree has no ANSWERS.md"
grep -q "^## Question 1" "$tree/ANSWERS.md" || fail "ANSWERS.md does not list the sheet's questions"
make -C "$tree" -s -j2 BUILD=build all _build_graders >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "the tree does not build"; }

submit() {   # submit ID [--no-build]: hand the tree in as ID, the tarball into subs/
  (cd "$tree" && /usr/bin/python3 tools/coursework_submit.py --student "$1" ${2:-}) >"$tmp/submit.log" 2>&1 \
    || { cat "$tmp/submit.log"; fail "submit $1 failed"; }
  mv "$tree/submission-04-$1.tar.gz" "$subs/"
}
put_back() {   # the exercises as in a fresh tree: stubs (none) or solutions (all)
  if [ "$1" = all ]; then /usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/trees" --keep all >/dev/null
  else /usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/trees" >/dev/null; fi
}
sa=$tree/chapters/04_self_attention/self_attention.c

echo "== make submit asks for an id, and refuses a tree that does not build"
rm -f "$tree/.student"
out=$(make -C "$tree" -s submit 2>&1) && fail "make submit without an id passed: $out"
echo "$out" | grep -q "make submit STUDENT=" || fail "make submit without an id said: $out"
echo "int broken = ;" >>"$sa"
out=$(make -C "$tree" -s submit STUDENT=broken 2>&1) && fail "make submit passed on a tree that does not build"
[ "$(echo "$out" | grep -c '^submit: ')" = 1 ] && echo "$out" | grep -q "does not build" \
  || fail "make submit on a broken tree said: $out"
[ -f "$tree/.student" ] && [ "$(cat "$tree/.student")" = broken ] || fail ".student does not remember the id"
submit broken --no-build
put_back none

echo "== the submissions"
submit empty
# the grader edited to pass everything: the teacher's grader is used, the row says so
sed -i 's/if (checks\[k\].run() != 0)/if (0)/' "$tree/tests/coursework/grade.c"
grep -q 'if (0)' "$tree/tests/coursework/grade.c" || fail "could not edit the tree's grade.c"
echo "/* every check passes, says the student */" >>"$tree/tests/coursework/grade_04.c"
submit edited-grader
cp "$root/tests/coursework/grade_04.c" "$tree/tests/coursework/grade_04.c"
cp "$root/tests/coursework/grade.c" "$tree/tests/coursework/grade.c"
put_back all
submit complete
submit unpacked
mkdir "$subs/unpacked" && tar -xzf "$subs/submission-04-unpacked.tar.gz" -C "$subs/unpacked" && rm "$subs/submission-04-unpacked.tar.gz"
submit tampered
mkdir "$tmp/t" && tar -xzf "$subs/submission-04-tampered.tar.gz" -C "$tmp/t"
echo "/* changed after make submit */" >>"$tmp/t/chapters/04_self_attention/self_attention.c"
(cd "$tmp/t" && tar -czf "$subs/submission-04-tampered.tar.gz" .)
echo "my homework" >"$subs/homework.txt"
put_back none
# 04.projections: the solution's forward part in place of its stub, the backward left a stub
cp "$sa" "$tmp/stubbed.c"
put_back all
cp "$sa" "$tmp/solved.c"
/usr/bin/python3 - "$tmp/stubbed.c" "$tmp/solved.c" "$sa" <<'PY'
import re, sys
stubbed, solved, out = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
part = re.compile(r"/\* Exercise 04\.projections.*?\*/\n.*?/\* End of exercise 04\.projections\. \*/", re.S)
first_solved = part.search(solved).group(0)
m = part.search(stubbed)
open(out, "w").write(stubbed[:m.start()] + first_solved + stubbed[m.end():])
PY
grep -q 'coursework_todo("04.projections", "self_attention_backward")' "$sa" || fail "the partial tree lost its backward stub"
grep -q 'coursework_todo("04.projections", "self_attention_forward")' "$sa" && fail "the partial tree kept its forward stub"
submit partial
put_back all
replace_stub_solved() {   # the sinusoid's first line becomes CODE (the rest stays the solution's)
  /usr/bin/python3 - "$sa" "$1" <<'PY'
import re, sys
path, code = sys.argv[1:]
text = open(path).read()
m = re.search(r"(/\* Exercise 04\.sinusoidal[^\n]*\*/\n)", text)
open(path, "w").write(text[:m.end()] + "    " + code + "\n" + text[m.end():])
PY
}
replace_stub_solved '{ volatile int *nowhere = NULL; *nowhere = 1; }'
submit crashing
put_back all
replace_stub_solved 'for (volatile int forever = 1; forever;) {}'
submit looping
put_back none
ls "$subs"

echo "== make grade-submissions"
start=$(date +%s)
make -s grade-submissions DIR="$subs" GRADEBOOK_OUT="$tmp/gradebook" SEED=20260 TIME_LIMIT=10 | tee "$tmp/grade.log"
echo "(graded in $(( $(date +%s) - start )) s)"
/usr/bin/python3 - "$tmp/gradebook" <<'PY'
import csv, os, sys
out = sys.argv[1]
rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(out, "gradebook.csv")))}
# student: (status starts with, total, first failure contains)
want = {
    "complete": ("graded", "10", ""),
    "unpacked": ("graded", "10", ""),
    "empty": ("graded", "0", "04.projections: not written yet"),
    "partial": ("graded", "4", "self_attention_forward right so far, self_attention_backward not written yet"),
    "broken": ("does not compile", "0", "error"),
    "crashing": ("graded", "8", "04.sinusoidal: crashed"),
    "looping": ("graded", "8", "04.sinusoidal: did not finish in 10 s"),
    "edited-grader": ("graded; grader files changed (tests/coursework/grade.c, tests/coursework/grade_04.c)", "0",
                      "not written yet"),
    "homework.txt": ("not graded", "0", "not a submission"),
    "submission-04-tampered.tar.gz": ("not graded", "0", "does not match its sha256"),
}
bad = []
for student, (status, total, first) in want.items():
    r = rows.get(student)
    if r is None:
        bad.append(f"{student}: no row (rows: {', '.join(rows)})")
    elif not r["status"].startswith(status) or r["total"] != total or first not in r["first failure"]:
        bad.append(f"{student}: got status {r['status']!r}, total {r['total']}, first failure {r['first failure']!r}; "
                   f"want {status!r}, {total}, {first!r}")
    elif not os.path.exists(os.path.join(out, "feedback", student + ".txt")):
        bad.append(f"{student}: no feedback file")
if set(rows) != set(want):
    bad.append(f"rows {sorted(rows)}, want {sorted(want)}")
part = open(os.path.join(out, "feedback", "partial.txt")).read()
if "not written yet: self_attention_backward()" not in part or "passed  Y and A against PyTorch" not in part:
    bad.append("partial's feedback does not say which checks passed and which part is missing:\n" + part)
if not os.path.exists(os.path.join(out, "answers", "complete.md")):
    bad.append("complete's ANSWERS.md is not under answers/")
if "hidden: " not in open(os.path.join(out, "feedback", "complete.txt")).read():
    bad.append("complete's feedback shows no hidden check")
for line in bad:
    print("test_submissions: FAIL:", line)
if bad:
    print(open(os.path.join(out, "gradebook.csv")).read())
    sys.exit(1)
print(f"test_submissions: {len(want)} submissions, every gradebook row as expected")
PY
