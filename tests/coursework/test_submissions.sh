#!/usr/bin/env bash
# test_submissions.sh - the coursework's hand-in and gradebook end to end,
# with a hostile class (make test-submissions; a few minutes, so not in make test):
#
#  - chapter 04's student tree is written and built once; make submit refuses
#    a tree that does not compile, with one line, and asks for a student id;
#  - honest hand-ins are made with tools/coursework_submit.py: complete, empty,
#    partial (04.projections' forward written, its backward not), not
#    compiling, crashing and looping (04.sinusoidal), empty code with the
#    grader edited to pass everything, the complete one unpacked into a
#    folder, a file that is no hand-in, a tarball whose file no longer matches
#    its manifest; a wrong causal mask with every other exercise right, which
#    make grade and the gradebook both mark down by the mask's 2 points only
#    (each exercise graded alone);
#  - the hostile ones (tests/coursework/hostile/): code that prints PASS,
#    replaces the grader, includes the solution or /etc/passwd, edits shared
#    files, reads the teacher's files, writes outside its copy, opens a
#    socket, outlives its grading, forks or allocates without end, prints
#    2 GiB; and hand-ins that attack the reading (make_hostile.py);
#  - make grade-submissions grades the folder (hidden checks on, 10 s per
#    exercise): each row is the expected one (status, points, first failure;
#    one row per student and chapter, the newest of three hand-ins graded),
#    nothing outside a hand-in's copy changed (the teacher's tree, the grader's
#    trees and recorded values, the other hand-ins, $HOME, /tmp), nothing
#    connected to the listener, no student process is left and the gradebook
#    stays as written; without bwrap it refuses to run unless UNSANDBOXED=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
unset MAKEFLAGS MFLAGS MAKELEVEL
export CI= STRICT=
tmp=$(mktemp -d /tmp/attn_submissions_test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/trees/04_self_attention
subs=$tmp/subs
hostile=$root/tests/coursework/hostile
mkdir -p "$subs"
fail() { echo "test_submissions: FAIL: $*"; exit 1; }

echo "== the student tree, built once"
/usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/trees" >/dev/null
[ -f "$tree/ANSWERS.md" ] || fail "the tree has no ANSWERS.md"
grep -q "^## Question 1" "$tree/ANSWERS.md" || fail "ANSWERS.md does not list the sheet's questions"
make -C "$tree" -s -j2 BUILD=build all _build_graders >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "the tree does not build"; }

submit() {   # submit ID [--build]: hand the tree in as ID (building it first), the tarball into subs/
  local no_build=--no-build
  [ "${2:-}" = --build ] && no_build=
  (cd "$tree" && /usr/bin/python3 tools/coursework_submit.py --student "$1" $no_build) >"$tmp/submit.log" 2>&1 \
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
submit broken
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
echo "Question 1: one projection each for Q, K and V (measured: ...)." >>"$tree/ANSWERS.md"
submit complete --build
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
put_back all
# a wrong causal mask (one future key), every other exercise right: only the mask's 2 points go, in make grade
# here and in the gradebook below (each exercise graded alone: the others are the solution's)
att=$tree/chapters/03_dot_product_attention/attention.c
sed -i 's/if (m->causal \&\& i + 1 < limit) limit = i + 1;/if (m->causal \&\& i + 2 < limit) limit = i + 2;/' "$att"
grep -q 'limit = i + 2;' "$att" || fail "could not plant the wrong causal mask"
make -C "$tree" -s -j2 BUILD=build grade >"$tmp/grade-wrong-mask.log" 2>&1 || true
/usr/bin/python3 - "$tree/build/coursework/grade.json" "$tmp/grade-wrong-mask.log" <<'PY' || fail "make grade on the wrong mask"
import json, sys
g = json.load(open(sys.argv[1]))
lost = {e["id"]: e["points"] - e["earned"] for e in g["exercises"] if e["earned"] != e["points"]}
if lost != {"04.causal_mask": 2}:
    print(open(sys.argv[2]).read())
    sys.exit(f"make grade on a wrong causal mask took away {lost}, want only 04.causal_mask's 2 points")
PY
submit wrong-mask

echo "== the hostile hand-ins"
work=$tmp/work
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
attack() {   # attack BASE NAME: tests/coursework/hostile/NAME.c on the stub (none) or solution (all), handed in as NAME
  put_back "$1"
  local file=$hostile/$2.c
  if [ "${2%%_*}" = whole ]; then : >"$sa"; fi
  sed -e "s|@ROOT@|$root|g; s|@WORK@|$work|g; s|@OUT@|$tmp/gradebook|g; s|@SUBS@|$subs|g; s|@HOME@|$HOME|g" \
      -e "s|@PORT@|$port|g" "$file" >>"$sa"
  submit "${2//_/-}"
}
attack none stub_fake_pass
attack none stub_grader_replaced
attack none stub_include_passwd
attack none whole_include_solution
for a in shared_edit outliving reads writes socket fork_bomb memory_bomb big_stdout; do attack all "solved_$a"; done
put_back none
submit stranger   # not on the roster
/usr/bin/python3 "$hostile/make_hostile.py" "$subs" "$subs/submission-04-complete.tar.gz" tests/coursework/TEACHER.md

echo "== without bwrap: refused unless UNSANDBOXED=1"
out=$(/usr/bin/python3 tools/coursework_submissions.py "$subs" --out "$tmp/refused" --bwrap /nonexistent/bwrap 2>&1) \
  && fail "grading without bwrap ran: $out"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "UNSANDBOXED=1" || fail "grading without bwrap said: $out"
[ -e "$tmp/refused/gradebook.csv" ] && fail "grading without bwrap wrote a gradebook"

echo "== the listener, and the hashes before"
/usr/bin/python3 - "$port" "$tmp/connections" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connection\n")
    c.close()
PY
listener=$!
trap 'kill $listener 2>/dev/null; rm -rf "$tmp"' EXIT
hashes() {   # the files no hand-in may change: the grader's sources here, the hand-ins
  (cd "$root" && sha256sum tests/coursework/*.[ch] tools/coursework*.py && ls tests/coursework)
  (cd "$subs" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
hashes >"$tmp/before"
{ echo "student,name"; for f in "$subs"/submission-04-*.tar.gz "$subs"/unpacked; do
    id=${f##*/}; id=${id#submission-04-}; id=${id%.tar.gz}; [ "$id" = stranger ] || echo "$id,someone"; done
  echo "absent,someone who handed nothing in"; } >"$tmp/roster.csv"
rm -f /tmp/attn_hostile_tmp "$HOME/attn_hostile_home"

echo "== make grade-submissions"
start=$(date +%s)
make -s grade-submissions DIR="$subs" GRADEBOOK_OUT="$tmp/gradebook" SEED=20260 TIME_LIMIT=10 WORK="$work" ROSTER="$tmp/roster.csv" \
  | tee "$tmp/grade.log"
echo "(graded in $(( $(date +%s) - start )) s)"
sha256sum "$tmp/gradebook/gradebook.csv" "$tmp/gradebook/feedback/complete.txt" >"$tmp/written"
sleep 2   # a process that outlived its sandbox would write now

echo "== nothing outside a hand-in's copy changed"
hashes >"$tmp/after"
diff "$tmp/before" "$tmp/after" || fail "a hand-in changed the files above"
sha256sum -c --quiet "$tmp/written" || fail "the gradebook or a feedback file changed after it was written"
[ -e /tmp/attn_hostile_tmp ] && fail "a hand-in wrote the system's /tmp"
[ -e "$HOME/attn_hostile_home" ] && fail "a hand-in wrote \$HOME"
[ -e "$root/attn_hostile_repo" ] && fail "a hand-in wrote into the repository"
[ -s "$tmp/connections" ] && fail "a hand-in connected to the listener"
grep -l attn_hostile /proc/[0-9]*/comm 2>/dev/null && fail "a hand-in's process outlived the batch"
/usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/fresh-stub" >/dev/null
/usr/bin/python3 tools/coursework.py --chapter 04 --out "$tmp/fresh-solution" --keep all >/dev/null
for part in tests/coursework chapters/04_self_attention; do   # (the rest may change here while the test runs)
  diff -r "$tmp/fresh-stub/04_self_attention/$part" "$work/stub/04_self_attention/$part" \
    || fail "the student tree the hand-ins start from changed ($part)"
  diff -r "$tmp/fresh-solution/04_self_attention/$part" "$work/teacher/solution/04_self_attention/$part" \
    || fail "the solution tree changed ($part)"
done
ls -d /tmp/attn_hand_ins.* 2>/dev/null && fail "the hand-ins' copies were left behind"
(cd "$work/teacher/solution/04_self_attention" && build/coursework/grade_04 --hidden 20260 --record "$tmp/again.bin" >/dev/null) \
  && cmp -s "$tmp/again.bin" "$work/teacher/solution-04.bin" || fail "the solution's recorded values changed"
grep -q "$(printf '\033')" "$tmp/grade.log" && fail "the console got a control character"
grep -q "^zz: 10" "$tmp/grade.log" && fail "a file name printed a line of its own"
grep -rlE "LEAK|root:x:0|hostile:" "$tmp/gradebook" && fail "a feedback file shows what a hand-in printed"
/usr/bin/python3 - "$tmp/gradebook" <<'PY'
import csv, os, sys
out = sys.argv[1]
rows = {}
for r in csv.DictReader(open(os.path.join(out, "gradebook.csv"))):
    key = r["source"] or "roster: " + r["student"]   # a student on the roster who handed nothing in
    if key in rows:
        print(f"test_submissions: FAIL: two rows for {key}: {rows[key]} and {r}")
        sys.exit(1)
    rows[key] = r
T = "submission-04-{}.tar.gz".format
NG = "not graded"
# source: (student, status starts with, points, first failure contains)
want = {
    T("complete"): ("complete", "graded", "10", ""),
    "unpacked": ("unpacked", "graded", "10", ""),
    T("empty"): ("empty", "graded", "0", "04.projections: not written yet"),
    T("partial"): ("partial", "graded", "4",
                   "self_attention_forward right so far, self_attention_backward not written yet"),
    T("broken"): ("broken", "does not compile", "0", "error"),
    T("crashing"): ("crashing", "graded", "8", "04.sinusoidal: crashed (SIGSEGV)"),
    T("looping"): ("looping", "graded", "8", "04.sinusoidal: did not finish in 10 s"),
    T("wrong-mask"): ("wrong-mask", "graded", "8", "04.causal_mask: "),
    T("edited-grader"): ("edited-grader", "graded; grader files changed (tests/coursework/grade.c, "
                         "tests/coursework/grade_04.c)", "0", "not written yet"),
    "homework.txt": ("homework.txt", NG, "0", "not a hand-in"),
    T("tampered"): ("tampered", NG, "0", "does not match its sha256"),
    # the hostile class: code
    T("stub-fake-pass"): ("stub-fake-pass", "graded", "0", "04.projections: "),
    T("stub-grader-replaced"): ("stub-grader-replaced", "graded", "0", "04.projections: "),
    T("stub-include-passwd"): ("stub-include-passwd", "does not compile", "0", "/etc/passwd: No such file"),
    T("whole-include-solution"): ("whole-include-solution", "does not compile", "0", "No such file"),
    T("solved-shared-edit"): ("solved-shared-edit", "graded", "10", ""),
    T("solved-outliving"): ("solved-outliving", "graded", "10", ""),
    T("solved-reads"): ("solved-reads", "graded", "10", ""),
    T("solved-writes"): ("solved-writes", "graded", "10", ""),
    T("solved-socket"): ("solved-socket", "graded", "10", ""),
    T("solved-fork-bomb"): ("solved-fork-bomb", "graded", "10", ""),
    T("solved-memory-bomb"): ("solved-memory-bomb", "graded", "10", ""),
    T("solved-big-stdout"): ("solved-big-stdout", "graded", "0", "crashed (SIGXFSZ)"),
    # the hostile class: reading
    T("path-number"): ("path-number", NG, "0", "each of 'files' must be"),
    T("path-null"): ("path-null", NG, "0", "each of 'files' must be"),
    T("chapter-climb"): ("chapter-climb", NG, "0", "is not one of this course's"),
    T("no-files"): ("no-files", NG, "0", "lists no files"),
    T("newline-id"): ("newline-id", NG, "0", "is not an id"),
    T("not-json"): ("not-json", NG, "0", "not JSON"),
    T("thief"): ("thief", NG, "0", "says it is student 'complete', its name says 'thief'"),
    T("dev-zero-link"): ("dev-zero-link", NG, "0", "is a link"),
    T("hardlink"): ("hardlink", NG, "0", "is a link"),
    T("fifo-member"): ("fifo-member", NG, "0", "not a regular file"),
    T("device"): ("device", NG, "0", "not a regular file"),
    T("setuid"): ("setuid", NG, "0", "setuid"),
    T("newline-member"): ("newline-member", NG, "0", "control characters"),
    T("big-answers"): ("big-answers", NG, "0", "ANSWERS.md is 5242880 bytes"),
    T("many-members"): ("many-members", NG, "0", "more than 200 members"),
    T("heavy"): ("heavy", NG, "0", "add up to more than"),
    T("sparse"): ("sparse", NG, "0", "sparse"),
    "manifest-folder": ("manifest-folder", NG, "0", "manifest.json is not a regular file"),
    "answers-link": ("answers-link", NG, "0", "a symbolic link"),
    "answers-fifo": ("answers-fifo", NG, "0", "not a regular file"),
    T("fifo"): ("fifo", NG, "0", "not a file or folder"),
    T("link"): ("link", NG, "0", "a symbolic link"),
    ".sneaky.tar.gz": (".sneaky.tar.gz", NG, "0", "a hidden name"),
    # the roster
    T("stranger"): ("stranger", NG, "0", "not on the roster"),
    "roster: absent": ("absent", "not handed in", "0", ""),
    "evil\\x0azz: 10 - 10  graded": ("evil\\x0azz: 10 - 10  graded", NG, "0", "control characters"),
}
bad = []
for source, (student, status, points, first) in want.items():
    r = rows.get(source)
    if r is None:
        bad.append(f"{source}: no row")
    elif r["student"] != student or not r["status"].startswith(status) or r["points"] != points \
            or first not in r["first failure"]:
        bad.append(f"{source}: got {r['student']!r}, {r['status']!r}, {r['points']} points, first failure "
                   f"{r['first failure']!r}; want {student!r}, {status!r}, {points}, {first!r}")
if set(rows) != set(want):
    bad.append(f"rows for {sorted(set(rows) - set(want))}, none for {sorted(set(want) - set(rows))}")
# complete handed in three times: the newest graded (by the manifest's time, or the file's), the others named
done = rows[T("complete")]
if done["other hand-ins"] != "submission-04-complete.tgz; complete.tar.gz" or not done["submitted"].endswith("Z"):
    bad.append(f"complete's row names {done['other hand-ins']!r} as its other hand-ins, submitted "
               f"{done['submitted']!r}; want 'submission-04-complete.tgz; complete.tar.gz', the manifest's time")
feedback = os.path.join(out, "feedback")
for name in ("complete", "partial", "stub-fake-pass"):
    if not os.path.exists(os.path.join(feedback, name + ".txt")):
        bad.append(f"{name}: no feedback file")
part = open(os.path.join(feedback, "partial.txt")).read()
if "not written yet: self_attention_backward()" not in part or "passed  Y and A against PyTorch" not in part:
    bad.append("partial's feedback does not say which checks passed and which part is missing:\n" + part)
if not os.path.exists(os.path.join(out, "answers", "complete.md")):
    bad.append("complete's ANSWERS.md is not under answers/")
if "ANSWERS.md: not answered" not in open(os.path.join(feedback, "empty.txt")).read():
    bad.append("empty's untouched ANSWERS.md is not reported as not answered")
if "hidden: " not in open(os.path.join(feedback, "complete.txt")).read():
    bad.append("complete's feedback shows no hidden check")
if "not graded (older than submission-04-complete.tar.gz): complete.tar.gz (1999-12-31T00:00:00Z (file))" \
        not in open(os.path.join(feedback, "complete.txt")).read():
    bad.append("complete's feedback does not name its older hand-ins")
for line in bad:
    print("test_submissions: FAIL:", line)
if bad:
    print(open(os.path.join(out, "gradebook.csv")).read())
    sys.exit(1)
print(f"test_submissions: {len(want)} hand-ins, every gradebook row as expected")
PY
