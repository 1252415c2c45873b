#!/usr/bin/env bash
# test_figures.sh - the figure manifest (chapters/FIGURES.tsv, tools/figures.py check) on this tree, and proof
# that the check can fail, on a planted tree: a small git repository with one chapter, one picture and its text.
#
#   bash tests/test_figures.sh [BUILD]     (tests/run_all.sh runs it)
#
# Checks, reported in cmocka's words so tests/run_all.sh counts them:
#   this tree          every picture current: no code changed since it was drawn, every image in a text and a row
#   planted_current    the planted tree as committed passes
#   planted_older      a change to the file its row names makes the picture "older than its code"
#   planted_uncommitted  the same change not yet committed is caught too
#   planted_orphan     an image in img/ with no row and no text is caught
#   planted_unshown    a row whose image no text shows is caught
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
figures="/usr/bin/python3 $root/tools/figures.py"
passed=0 failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ok()   { echo "[       OK ] $1"; passed=$((passed + 1)); }
fail() { echo "[  FAILED  ] $1: $2"; failed=$((failed + 1)); }

echo "[ RUN      ] figures_of_this_tree"
if out=$($figures check --repo "$root" --build "$build" 2>&1); then ok figures_of_this_tree
else echo "$out"; fail figures_of_this_tree "tools/figures.py check found figures older than their code"; fi

# The planted tree: chapters/01_x/{README.md, img/a.png, model.c} and a manifest row naming model.c.
p="$work/planted"
mkdir -p "$p/chapters/01_x/img"
printf 'code 1\n' > "$p/chapters/01_x/model.c"
printf 'picture\n' > "$p/chapters/01_x/img/a.png"
printf '# x\n\n![a](img/a.png)\n' > "$p/chapters/01_x/README.md"
git -C "$p" init -q
git -C "$p" -c user.name=t -c user.email=t@t add -A
git -C "$p" -c user.name=t -c user.email=t@t commit -q -m planted
head=$(git -C "$p" rev-parse --short=12 HEAD)
printf '# planted\nchapters/01_x/img/a.png\t%s\t1\texperiment\t-\tchapters/01_x/model.c\tout/a.png\ttrue\n' "$head" \
  > "$p/chapters/FIGURES.tsv"

# expect NAME WANT_RC PATTERN: the check's exit status and a line it must print.
expect() {
  local name=$1 want=$2 pattern=$3 out rc
  echo "[ RUN      ] $name"
  out=$($figures check --repo "$p" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "$out"; fail "$name" "exit status $rc, expected $want"
  elif ! grep -q -- "$pattern" <<<"$out"; then echo "$out"; fail "$name" "no line matching '$pattern'"
  else ok "$name"; fi
}
expect planted_current 0 "0 problem"
printf 'code 2\n' > "$p/chapters/01_x/model.c"
expect planted_uncommitted 1 "a.png: older than its code (chapters/01_x/model.c changed"
git -C "$p" -c user.name=t -c user.email=t@t commit -q -am "change the model"
expect planted_older 1 "a.png: older than its code"
git -C "$p" -c user.name=t -c user.email=t@t revert --no-edit HEAD >/dev/null
printf 'stray\n' > "$p/chapters/01_x/img/b.png"
expect planted_orphan 1 "b.png: in img/ but not in the manifest"
rm "$p/chapters/01_x/img/b.png"
printf '# x\n\nno picture\n' > "$p/chapters/01_x/README.md"
expect planted_unshown 1 "a.png: in img/ but no text shows it"

echo "[==========] $((passed + failed)) test(s) run."
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ] || echo "[  FAILED  ] $failed test(s)."
[ "$failed" -eq 0 ]
