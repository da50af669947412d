#!/usr/bin/env bash
# The fixed cost per op call, ours beside libtorch: runs bench/op_overhead and its libtorch twin
# (bench/op_overhead_torch, built when Debian's libtorch-dev is installed) in alternating rounds
# and prints per chain "CHAIN ours_us torch_us ratio" (microseconds per op call, one thread),
# then our budgeted chains, which have no twin.
# Usage: BUILD_DIR=build OPS=200000 ROUNDS=3 bench/op_overhead.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-build}
[[ $build = /* ]] || build=$root/$build
ops=${OPS:-200000}
rounds=${ROUNDS:-3}
cmake --build "$build" --target op_overhead -j"${JOBS:-1}" >/dev/null
ours=$build/bench/op_overhead twin=$build/bench/op_overhead_torch
if ! cmake --build "$build" --target op_overhead_torch -j"${JOBS:-1}" >/dev/null 2>&1 || [[ ! -x $twin ]]; then
  echo "op_overhead.sh: no libtorch twin (install libtorch-dev and reconfigure); ours only" >&2
  twin=
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 REMAT_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < rounds; ++r)); do
  "$ours" --ops "$ops" --rounds 1 >>"$tmp/ours"
  [[ -z $twin ]] || "$twin" "$ops" 1 >>"$tmp/torch"
done
median() {  # median of the values of chain $1 in file $2
  awk -v k="$1" '$1 == k { print $2 }' "$2" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
echo "# chain ours_us torch_us ratio (median of $rounds rounds of $ops calls, one thread)"
for chain in $(awk '!/^#/ { print $1 }' "$tmp/ours" | awk '!seen[$0]++'); do
  o=$(median "$chain" "$tmp/ours")
  t=$([[ -n $twin ]] && median "$chain" "$tmp/torch" || true)
  if [[ -n $t ]]; then
    awk -v c="$chain" -v o="$o" -v t="$t" 'BEGIN { printf "%s %.3f %.3f %.2f\n", c, o, t, o / t }'
  else
    awk -v c="$chain" -v o="$o" 'BEGIN { printf "%s %.3f - -\n", c, o }'
  fi
done
grep '^#' "$tmp/ours" | tail -1
