#!/usr/bin/env bash
# Runs the libFuzzer targets of the sanitizer build (scripts/test.sh --sanitize, with clang) for
# SECONDS each, two at a time, starting from the committed corpora.  New interesting inputs go
# to build-sanitize/fuzz-work/<target>/; a crash leaves its reproducer there and fails the run
# (add it to tests/fuzz/corpus/<target>/ as regress-NAME once fixed).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 600 sim state
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"; shift || true
build="${BUILD_DIR:-build-sanitize}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do t=$(basename "$f" .cpp); targets+=("${t#fuzz_}"); done
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
  local t="$1" bin="$build/tests/fuzz/fuzz_$1" work="$build/fuzz-work/$1"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (scripts/test.sh --sanitize with clang)"; return 1; }
  mkdir -p "$work"
  # Inputs are small; a run that needs gigabytes or seconds is a finding.
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 -max_len=65536 \
    -artifact_prefix="$work/" "$work" "tests/fuzz/corpus/$t" >"$work.log" 2>&1
  local rc=$?
  local done_line; done_line=$(grep -E "^Done [0-9]+ runs" "$work.log" | tail -n 1)
  echo "fuzz: $t: ${done_line:-no summary} (exit $rc; log $work.log)"
  [ $rc -eq 0 ] || tail -n 40 "$work.log"
  return $rc
}

failed=0
pids=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
