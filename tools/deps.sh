#!/usr/bin/env bash
# deps.sh - check for (and, as root, install) the Debian packages a target needs.
#
#   tools/deps.sh test    libcmocka-dev, zlib1g-dev, dataset-fashion-mnist   (required)
#   tools/deps.sh run     zlib1g-dev, dataset-fashion-mnist (required), gnuplot-nox (optional: PNGs)
#   tools/deps.sh bench   zlib1g-dev, libopenblas-dev (required), python3-torch (optional)
#   tools/deps.sh twin    python3-torch, python3-numpy     (required)
#   tools/deps.sh fuzz    clang-14, libclang-rt-14-dev (libFuzzer, sanitizers), libomp-14-dev,
#                         zlib1g-dev  (required: make fuzz)
#   tools/deps.sh clang   clang, libomp-dev (clang's OpenMP), libcmocka-dev, zlib1g-dev,
#                         dataset-fashion-mnist  (required: CC=clang make test)
#   tools/deps.sh valgrind  valgrind (required: make test-valgrind)
#   tools/deps.sh grade   bubblewrap (the sandbox of make grade-submissions and make test-submissions)
#   tools/deps.sh arm     gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, libgomp1-arm64-cross,
#                         qemu-user, and the arm64 builds of libcmocka-dev and zlib1g-dev
#                         (Debian multiarch: adds the arm64 architecture to dpkg first)
#                         (required: make test-arm, mk/arm.mk)
#
# As root it runs apt-get; otherwise it prints the one command to run. On
# macOS it prints the Homebrew line instead while a package is missing
# (whatever the target): libomp gives Apple's clang OpenMP (the Makefile finds it).
# dataset-fashion-mnist is the data of chapter 07 (the Vision Transformer): the
# four gzip'd IDX files in /usr/share/datasets/fashion-mnist (data/README.md).
set -u
what=${1:-test}
required=() optional=()
case "$what" in
  test)  required=(libcmocka-dev zlib1g-dev dataset-fashion-mnist gcc make) ;;
  run)   required=(zlib1g-dev dataset-fashion-mnist gcc make); optional=(gnuplot-nox) ;;
  bench) required=(zlib1g-dev libopenblas-dev gcc make); optional=(gnuplot-nox python3-torch) ;;
  twin)  required=(python3-torch python3-numpy zlib1g-dev gcc make) ;;
  fuzz)  required=(clang-14 libclang-rt-14-dev libomp-14-dev zlib1g-dev make) ;;
  clang) required=(clang libomp-dev libcmocka-dev zlib1g-dev dataset-fashion-mnist make) ;;
  valgrind) required=(valgrind) ;;
  grade) required=(bubblewrap gcc make) ;;
  arm)   required=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libgomp1-arm64-cross qemu-user make
                   libcmocka-dev:arm64 zlib1g-dev:arm64) ;;
  *) echo "deps.sh: unknown target '$what' (expected test, run, bench, twin, fuzz, clang, valgrind, grade or arm)" >&2; exit 2 ;;
esac

# macOS: Homebrew's packages, not Debian's; the line to run while one is missing.
if [ "$(uname -s)" = Darwin ]; then
  for p in libomp gnuplot cmocka; do
    if ! brew list --versions "$p" >/dev/null 2>&1; then
      echo "deps.sh: macOS: Xcode's command-line tools (xcode-select --install), Homebrew (https://brew.sh), then" >&2
      echo "deps.sh: run: brew install libomp gnuplot cmocka" >&2
      break
    fi
  done
  exit 0
fi

missing() {  # print the packages of "$@" that dpkg does not list as installed
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

install() {  # apt-get install "$@" as root; returns non-zero on failure
  [ "$#" -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then return 1; fi
  echo "deps.sh: installing $* (apt-get)"
  if [ ! -f /tmp/.attn-apt-updated ]; then
    apt-get update -qq >/dev/null && touch /tmp/.attn-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/tmp/attn-apt.log 2>&1 \
    || { tail -n 5 /tmp/attn-apt.log >&2; return 1; }
}

# The arm64 libraries (NAME:arm64) are Debian's own arm64 packages, installed
# beside the amd64 ones (multiarch): dpkg must know the architecture, and apt
# its package lists, before they can be installed.
if [ "$what" = arm ] && [ "$(id -u)" = 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "deps.sh: dpkg --add-architecture arm64 (multiarch, for the arm64 libraries)"
  dpkg --add-architecture arm64 && rm -f /tmp/.attn-apt-updated
fi

need=$(missing "${required[@]}")
if [ -n "$need" ]; then
  if ! install $need; then
    echo "deps.sh: missing packages for '$what': $need" >&2
    [ "$what" = arm ] && echo "deps.sh: first: sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2
    echo "deps.sh: run: sudo apt-get install -y $need" >&2
    exit 1
  fi
fi
want=$(missing "${optional[@]}")
if [ -n "$want" ] && ! install $want; then
  echo "deps.sh: note: optional packages not installed ($want): PNGs or comparisons will be skipped." >&2
  echo "deps.sh: to get them: sudo apt-get install -y $want" >&2
fi
exit 0
