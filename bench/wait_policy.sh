#!/usr/bin/env bash
# How long idle OpenMP workers should spin before they sleep (libgomp's GOMP_SPINCOUNT under
# OMP_WAIT_POLICY=PASSIVE), measured: training steps of several models (bench/compare_ours) at
# two threads, for each spin count,
#   alone       one process on the machine,
#   two procs   two such processes at once (each wants both cores),
#   busy core   one process beside a spinning single-threaded process,
# against the same models at one thread alone.  Prints, per spin count and scenario, the median
# ms per step of each model; ensure_thread_policy() (core/parallel.h) uses the count chosen here.
# Usage: BUILD_DIR=build SPINS="0 1000 3000 10000 30000 300000" STEPS=6 bench/wait_policy.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-build}
[[ $build = /* ]] || build=$root/$build
spins=${SPINS:-0 1000 3000 10000 30000 300000}
steps=${STEPS:-6}
models=${MODELS:-mlp,resnet32,transformer_lm,lstm_lm,treelstm,lstm_cell}
ours=$build/bench/compare_ours
[[ -x $ours ]] || cmake --build "$build" --target compare_ours -j"${JOBS:-2}" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null || true' EXIT

# Runs the models once; writes "model median ..." to $2.  Usage: run THREADS OUT [ENV...]
run() {
  local threads=$1 out=$2
  shift 2
  local commands=""
  IFS=, read -ra list <<<"$models"
  for m in "${list[@]}"; do commands+="$m $steps"$'\n'; done
  printf '%squit\n' "$commands" |
    env OMP_WAIT_POLICY=PASSIVE "$@" "$ours" --threads "$threads" --warmup 2 --models "$models" |
    awk '$1 != "ready" { n = split($0, a, " "); delete v; for (i = 2; i <= n; ++i) v[i - 1] = a[i];
         m = n - 1; for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
         printf "%s %.1f ", $1, (m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2) }' >"$out"
}

echo "wait_policy: median ms per step over $steps steps; models $models"
run 1 "$tmp/one"
echo "one thread, alone:            $(cat "$tmp/one")"
for s in $spins; do
  run 2 "$tmp/alone" GOMP_SPINCOUNT="$s"
  run 2 "$tmp/a" GOMP_SPINCOUNT="$s" &
  run 2 "$tmp/b" GOMP_SPINCOUNT="$s" &
  wait
  (while :; do :; done) &
  spinner=$!
  run 2 "$tmp/busy" GOMP_SPINCOUNT="$s"
  kill "$spinner"
  wait "$spinner" 2>/dev/null || true
  echo "spin $s, alone:              $(cat "$tmp/alone")"
  echo "spin $s, two procs:          $(cat "$tmp/a")| $(cat "$tmp/b")"
  echo "spin $s, busy core:          $(cat "$tmp/busy")"
done
