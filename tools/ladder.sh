#!/usr/bin/env bash
# ladder.sh - check the ladder rule on the libraries of a build: chapter N
# calls only chapters before it and common/, and common/ calls no chapter.
#
#   bash tools/ladder.sh [BUILD]     (default build; make test runs it through tests/test_ladder.sh)
#
# The Makefile builds BUILD/libcommon.a and one BUILD/libNN.a per chapter. For
# each library in turn this links a program made of every object of that
# library (--whole-archive: objects nobody calls are checked too) against only
# the libraries below it, earlier chapters latest first, then libcommon.a:
#
#   libcommon.a   alone
#   lib03.a       + lib02.a lib01.a libcommon.a
#
# A call into a later chapter is then an undefined symbol, reported as
#
#   ladder: chapter 03 calls block_forward, which neither an earlier chapter nor common/ defines
#
# and the script exits 1 (2: no libraries to check). It prints one line per
# library that passes.
set -u
build=${1:-build}
cc=${CC:-cc}
libs=("$build"/lib[0-9][0-9].a)
if [ ! -f "$build/libcommon.a" ] || [ ! -f "${libs[0]}" ]; then
  echo "ladder: no $build/libcommon.a or $build/libNN.a (make BUILD=$build all builds them)" >&2
  exit 2
fi
# The link flags of the Makefile's LDLIBS (its OPENMP_LDLIBS, which it
# exports, unquoted to split them: none in a build without OpenMP); a
# sanitizer build (make test-san) needs its run-time libraries too.
ldlibs=(-lz -lm ${OPENMP_LDLIBS--fopenmp})
if nm "$build/libcommon.a" 2>/dev/null | grep -q ' U __asan_'; then
  ldlibs+=(-fsanitize=address,undefined)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo 'int main(void) { return 0; }' > "$work/main.c"
"$cc" -c "$work/main.c" -o "$work/main.o" || exit 2

status=0
below=()   # the libraries a library may call, latest chapter first
check() {  # check NAME LIBRARY WHAT: link LIBRARY whole against "${below[@]}"
  local name=$1 lib=$2 log="$work/link.log"
  if "$cc" "$work/main.o" -Wl,--whole-archive "$lib" -Wl,--no-whole-archive \
       "${below[@]}" "${ldlibs[@]}" -o "$work/a.out" 2>"$log"; then
    echo "ladder: $name calls only $3"
    return
  fi
  status=1
  local found=0
  while read -r sym; do
    echo "ladder: $name calls $sym, which neither an earlier chapter nor common/ defines"
    found=1
  done < <(sed -n "s/.*undefined reference to \`\([^']*\)'.*/\1/p" "$log" | sort -u)
  while read -r sym; do
    echo "ladder: $name defines $sym again (an earlier chapter or common/ has it)"
    found=1
  done < <(sed -n "s/.*multiple definition of \`\([^']*\)'.*/\1/p" "$log" | sort -u)
  if [ "$found" = 0 ]; then echo "ladder: $name does not link:"; cat "$log"; fi
}

check "common/" "$build/libcommon.a" "itself (no chapter)"
below=("$build/libcommon.a")
for lib in "${libs[@]}"; do
  nn=$(basename "$lib" .a); nn=${nn#lib}
  check "chapter $nn" "$lib" "earlier chapters and common/"
  below=("$lib" "${below[@]}")
done
exit $status
