#!/usr/bin/env bash
# mutants.sh - mutation testing of the coursework graders (make mutants).
#
#   bash tools/mutants.sh [PATTERN]     every tests/coursework/mutants/*.patch (or those matching PATTERN)
#   HIDDEN=SEED bash tools/mutants.sh   the same, and says of each mutant whether the hidden checks
#                                       alone (grade_NN --hidden SEED, tests/coursework/grade.h) fail it too
# A mutant the exercise's own checks pass is run through its hidden checks as well (seed HIDDEN, else 1),
# as make grade-submissions runs them: the end-to-end training checks are among them.
#
# A mutant is a plausible wrong solution, kept as a patch against this
# repository (whose code is the solution): tests/coursework/mutants/
# EXERCISE--WHAT.patch, e.g. 03.scaled_dot--scale-on-plain-dot.patch. Each is
# applied to a scratch copy of the tree, the exercise's grader is rebuilt and
# run on that exercise alone, and the patch is taken back out. The grader
# must take the exercise's points away (exit non-zero, a FAIL line saying
# what differs): the mutant is then "killed". A mutant that survives, or a
# patch that no longer applies, fails the run. Prints one line per mutant and
# the count.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
pattern=${1:-}
work=$(mktemp -d /tmp/attn_mutants.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The tracked files of this tree (with their changes), not a build of them.
(cd "$root" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$work"
cd "$work" || exit 1
# the scratch copy builds into its own build/ (make mutants BUILD=... names the caller's build, not this one)
export BUILD=build
unset MAKEFLAGS MFLAGS MAKELEVEL
killed=0 survived=0 stale=0 total=0 hidden_killed=0
hidden=${HIDDEN:-}
# The solution's hidden outputs, one file per chapter (seed HIDDEN, else 1): a mutant the exercise's own
# checks pass is killed when its hidden checks fail it (the end-to-end training checks are hidden: grade.h)
seed=${hidden:-1}
make -s -j2 _build_graders >"$work/build.log" 2>&1 || { tail -n 20 "$work/build.log"; exit 1; }
for g in build/coursework/grade_[0-9][0-9]; do
  "$g" --hidden "$seed" --record "$work/hidden_${g##*_}.bin" >/dev/null || { echo "$g fails its own hidden checks"; exit 1; }
done
for m in "$root"/tests/coursework/mutants/*.patch; do
  name=$(basename "$m" .patch)
  case "$name" in *"$pattern"*) ;; *) continue ;; esac
  exercise=${name%%--*}
  chapter=${exercise%%.*}
  total=$((total + 1))
  if ! patch -s -p1 --dry-run < "$m" >/dev/null 2>&1; then
    echo "mutant $name: STALE (the patch no longer applies to the code)"; stale=$((stale + 1)); continue
  fi
  patch -s -p1 < "$m"
  if ! make -s STRICT=1 -j2 "build/coursework/grade_$chapter" >"$work/build.log" 2>&1; then
    # a wrong solution that does not compile is not what a mutant is for
    tail -n 5 "$work/build.log"; echo "mutant $name: does not build"; stale=$((stale + 1))
  else
    out=$(timeout 300 "build/coursework/grade_$chapter" "$exercise" 2>&1); rc=$?
    why=$(printf '%s\n' "$out" | grep -m 1 '^FAIL' | cut -c1-160)
    # a crash (a signal: 128 + its number) costs the exercise its points as a FAIL does
    [ -z "$why" ] && [ $rc -gt 128 ] && why="crashed (signal $((rc - 128))) in $(printf '%s\n' "$out" | grep '^check' | tail -n 1 | cut -c1-120)"
    if [ -n "$hidden" ] || [ -z "$why" ]; then
      hidden_out=$(timeout 300 "build/coursework/grade_$chapter" "$exercise" --hidden "$seed" \
                   --reference "$work/hidden_$chapter.bin" 2>&1); hidden_rc=$?
      hidden_why=$(printf '%s\n' "$hidden_out" | grep -m 1 "^FAIL $exercise: hidden: " | cut -c1-160)
      [ -z "$hidden_why" ] && [ $hidden_rc -gt 128 ] && hidden_why="hidden checks crashed (signal $((hidden_rc - 128)))"
      if [ -n "$hidden_why" ]; then
        hidden_killed=$((hidden_killed + 1))
        if [ -z "$why" ]; then why="only by the hidden checks: $hidden_why"; rc=1; else why="$why; hidden checks: failed too"; fi
      elif [ -n "$hidden" ]; then
        why="$why; hidden checks: passed it"
      fi
    fi
    if [ $rc -ne 0 ] && [ -n "$why" ]; then
      echo "mutant $name: killed ($why)"; killed=$((killed + 1))
    else
      echo "mutant $name: SURVIVED (grade_$chapter $exercise passed it)"; survived=$((survived + 1))
    fi
  fi
  patch -s -R -p1 < "$m"
done
echo "mutants: $killed killed of $total ($survived survived, $stale stale)"
[ -n "$hidden" ] && echo "hidden checks alone (seed $hidden): $hidden_killed of $total killed"
[ "$total" -gt 0 ] && [ "$killed" -eq "$total" ]
