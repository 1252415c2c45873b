#!/usr/bin/env bash
# test_ladder.sh - the ladder rule (tools/ladder.sh) and no circle of calls
# (tools/call_circles.py) on this build, and proof that each can fail: copies
# of the build's libraries with objects added that break the rule must be
# refused, naming the library (the objects) and the symbol.
#
#   bash tests/test_ladder.sh [BUILD]     (tests/run_all.sh runs it)
#
# Five checks, reported in cmocka's words so tests/run_all.sh counts them:
#   this build           every library calls only the ones below it
#   chapter 03 -> 06     lib03.a gets an object calling a function of lib06.a
#   common/ -> 01        libcommon.a gets an object calling a function of lib01.a
#   no circles           no two objects call each other (tools/call_circles.py)
#   a circle             libcommon.a gets two objects that call each other
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
ladder="$root/tools/ladder.sh"
cc=${CC:-cc}
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ok()   { echo "[       OK ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }

echo "[ RUN      ] ladder_of_this_build"
if out=$(bash "$ladder" "$build" 2>&1); then ok ladder_of_this_build
else echo "$out"; fail ladder_of_this_build "tools/ladder.sh $build failed"; fi

# broken NAME CALLER CALLEE WANT: copies of the libraries where libCALLER.a
# has one more object calling a function that libCALLEE.a defines; the check
# must fail with a line "ladder: WANT calls SYMBOL".
broken() {
  local name=$1 caller=$2 callee=$3 want=$4 dir="$work/$1"
  echo "[ RUN      ] $name"
  mkdir -p "$dir" && cp "$build"/lib*.a "$dir/" || { fail "$name" "cannot copy $build/lib*.a"; return; }
  local sym
  sym=$(nm -g --defined-only "$build/lib$callee.a" 2>/dev/null | awk '$2 == "T" { print $3; exit }')
  if [ -z "$sym" ]; then fail "$name" "lib$callee.a defines no function"; return; fi
  printf 'void %s(void);\nvoid ladder_fixture(void) { %s(); }\n' "$sym" "$sym" > "$dir/fixture.c"
  "$cc" -c "$dir/fixture.c" -o "$dir/fixture.o" && ar rs "$dir/lib$caller.a" "$dir/fixture.o" 2>/dev/null \
    || { fail "$name" "cannot build the fixture"; return; }
  local out
  if out=$(bash "$ladder" "$dir" 2>&1); then
    echo "$out"; fail "$name" "tools/ladder.sh passed lib$caller.a calling $sym of lib$callee.a"
  elif ! grep -q "^ladder: $want calls $sym," <<<"$out"; then
    echo "$out"; fail "$name" "no line 'ladder: $want calls $sym, ...'"
  else
    ok "$name"
  fi
}
broken chapter_03_calls_chapter_06 03 06 "chapter 03"
broken common_calls_chapter_01 common 01 "common/"

# No two files call each other (tools/call_circles.py), on this build and on a
# copy whose libcommon.a gets two objects that call each other.
circles="$root/tools/call_circles.py"
echo "[ RUN      ] no_two_files_call_each_other"
if out=$(/usr/bin/python3 "$circles" "$build" 2>&1); then ok no_two_files_call_each_other
else echo "$out"; fail no_two_files_call_each_other "tools/call_circles.py $build found a circle"; fi
echo "[ RUN      ] a_circle_is_caught"
dir="$work/circle"
mkdir -p "$dir" && cp "$build"/lib*.a "$dir/"
printf 'void circle_b(void);\nvoid circle_a(void) { circle_b(); }\n' > "$dir/circle_a.c"
printf 'void circle_a(void);\nvoid circle_b(void) { circle_a(); }\n' > "$dir/circle_b.c"
if "$cc" -c "$dir/circle_a.c" -o "$dir/circle_a.o" && "$cc" -c "$dir/circle_b.c" -o "$dir/circle_b.o" &&
   ar rs "$dir/libcommon.a" "$dir/circle_a.o" "$dir/circle_b.o" 2>/dev/null; then
  out=$(/usr/bin/python3 "$circles" "$dir" 2>&1)
  if grep -q "^circle: libcommon.a:circle_a.o calls circle_b of libcommon.a:circle_b.o, and" <<<"$out"; then
    ok a_circle_is_caught
  else echo "$out"; fail a_circle_is_caught "no circle line for circle_a.o and circle_b.o"; fi
else fail a_circle_is_caught "cannot build the fixture"; fi

if [ "$failed" -gt 0 ]; then echo "[  FAILED  ] $failed test(s)."; fi
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ]
