#!/usr/bin/env bash
# run_all.sh - run every cmocka suite in BUILD/tests (and tests/test_*.sh) and
# print one summary line.
# Exits non-zero if any suite fails (or crashes).
# RUNNER, when set, is put in front of each suite (make test-valgrind:
# RUNNER="valgrind ... --error-exitcode=99"), so a memory error fails it.
# SUITES, when set, names the suites to run (e.g. "test_matmul test_layers";
# make test-backends: the kernel and layer suites), and no others.
set -u
build=${1:-build}
passed=0 failed=0 failed_suites=()
# The suites written as scripts (tests/test_*.sh: the ladder of the build's
# libraries) take BUILD as their argument and run without RUNNER.
for t in "$build"/tests/test_* "$(dirname "$0")"/test_*.sh; do
  case "$t" in
    *.sh) [ -f "$t" ] || continue ;;
    *) [ -x "$t" ] || continue ;;
  esac
  name=$(basename "$t")
  if [ -n "${SUITES:-}" ]; then
    case " $SUITES " in *" ${name%.sh} "*) ;; *) continue ;; esac
  fi
  log=$(mktemp)
  case "$t" in
    *.sh) bash "$t" "$build" >"$log" 2>&1 ;;
    *) ${RUNNER:-} "$t" >"$log" 2>&1 ;;
  esac
  rc=$?
  cat "$log"
  p=$(grep -Eo '\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1)
  f=$(grep -Eo '\[  FAILED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [ "$rc" -ne 0 ]; then
    failed_suites+=("$name")
    [ -z "$f" ] && failed=$((failed + 1))   # crashed before cmocka could count
  fi
  rm -f "$log"
done
echo
if [ "${#failed_suites[@]}" -gt 0 ]; then echo "failing suites: ${failed_suites[*]}"; fi
echo "tests: $passed passed, $failed failed"
[ "${#failed_suites[@]}" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
