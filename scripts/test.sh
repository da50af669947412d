#!/usr/bin/env bash
# Installs what is needed, configures, builds and runs the test suite.
#   scripts/test.sh              the layering check, the suite (Release build in build/) and the
#                                downstream project against an install (scripts/test-downstream.sh)
#   scripts/test.sh --sanitize   the suite under AddressSanitizer + UBSan (build-sanitize/; with
#                                clang, the fuzz targets too)
#   scripts/test.sh --all        both (the downstream project also through add_subdirectory),
#                                and each fuzz target for FUZZ_SECONDS (60) in between: what CI runs
# BUILD_DIR=... builds elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in
  ""|--sanitize|--all) ;;
  *) echo "usage: scripts/test.sh [--sanitize|--all]" >&2; exit 2 ;;
esac
scripts/setup.sh
jobs="$(nproc)"
# ccache keys on relative paths below the checkout, so another clone reuses this one's cache.
export CCACHE_BASEDIR="$PWD"

suite() {  # build folder, extra cmake arguments...
  local build="$1"; shift
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build" -j "$jobs"
  (cd "$build" && ctest --output-on-failure -j "$jobs")
}

sanitize_args() {
  local args=(-DREMAT_SANITIZE=ON -DREMAT_BUILD_BENCH=OFF)
  if command -v clang++ >/dev/null; then args+=(-DCMAKE_CXX_COMPILER=clang++); fi
  echo "${args[@]}"
}
# A finding aborts at once with a stack trace; leaks are findings too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

scripts/check-layers.sh
scripts/check-format.sh

case "$mode" in
  "")
    suite "${BUILD_DIR:-build}"
    BUILD_DIR="${BUILD_DIR:-build}" scripts/test-downstream.sh
    ;;
  --sanitize) suite "${BUILD_DIR:-build-sanitize}" $(sanitize_args) ;;
  --all)
    suite build
    scripts/test-downstream.sh --subdirectory
    # The sanitizer build's fuzzers run before its suite, so the suite's summary closes the log.
    cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Release $(sanitize_args)
    cmake --build build-sanitize -j "$jobs"
    if ls build-sanitize/tests/fuzz/fuzz_* 2>/dev/null | grep -qv _replay; then
      scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
    else
      echo "test: no libFuzzer targets (clang not found): fuzzing skipped"
    fi
    (cd build-sanitize && ctest --output-on-failure -j "$jobs")
    ;;
esac
