#!/usr/bin/env bash
# Data-parallel scaling of train_resnet (ResNet-20, Fashion-MNIST) from one process to two
# ranks under mpirun, one thread each, on this machine's cores:
#   1 rank  at batch B                      the baseline,
#   2 ranks at batch B each (global 2B)     weak scaling: images per second, against 2x,
#   2 ranks at batch B/2 each (global B)    strong scaling: steps per second, against 2x,
#   2 lone processes at batch B at once     no communication at all: what two busy cores allow
#                                           (shared caches, memory bandwidth, other work),
# each unbudgeted and at --budget 0.5 (per rank), and with default and small gradient buckets.
# Prints ms per step (rank 0's mean over the steady steps: the run's mean after the first
# WARMUP steps, from two runs' totals), images per second, the ratios, and per step the time
# in gradient communication (copying into buckets, driving transfers, waiting) and of that the
# wait after backward.
# Usage: BUILD_DIR=build STEPS=60 WARMUP=10 BATCH=64 bench/dist_scaling.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-build}
[[ $build = /* ]] || build=$root/$build
steps=${STEPS:-60}
warmup=${WARMUP:-10}
batch=${BATCH:-64}
program=$build/examples/train_resnet
[[ -x $program ]] || cmake --build "$build" --target train_resnet -j"${JOBS:-2}" >/dev/null
command -v mpirun >/dev/null || { echo "dist_scaling: mpirun is not installed (apt install openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints the summary JSON of one run.  Usage: run RANKS BATCH STEPS ARGS...
run() {
  local ranks=$1 b=$2 n=$3
  shift 3
  local launch=()
  [[ $ranks -gt 1 ]] && launch=(mpirun -np "$ranks" --oversubscribe --bind-to core)
  "${launch[@]}" "$program" --threads 1 --batch-size "$b" --steps "$n" --warmup 5 \
    --test-limit 256 --seed 1 "$@" 2>/dev/null | tail -1
}

# Steady ms per step and communication per step, from a long and a short run's totals.
# RANKS 0 runs two lone processes at once (their mean).
measure() {
  local ranks=$1 b=$2
  shift 2
  if [[ $ranks -eq 0 ]]; then
    run 1 "$b" "$steps" "$@" >"$tmp/long2" & run 1 "$b" "$steps" "$@" >"$tmp/long"; wait
    run 1 "$b" "$warmup" "$@" >"$tmp/short2" & run 1 "$b" "$warmup" "$@" >"$tmp/short"; wait
  else
    run "$ranks" "$b" "$steps" "$@" >"$tmp/long"
    run "$ranks" "$b" "$warmup" "$@" >"$tmp/short"
  fi
  python3 - "$tmp/long" "$tmp/short" "$((steps - warmup))" "$ranks" "$b" "$tmp/long2" "$tmp/short2" <<'PY'
import json, sys
long, short = (json.load(open(p)) for p in sys.argv[1:3])
n, ranks, batch = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ms = (long["ms_per_step"] * long["steps"] - short["ms_per_step"] * short["steps"]) / n
if ranks == 0:  # two lone processes: their mean, and the images of both
    long2, short2 = (json.load(open(p)) for p in sys.argv[6:8])
    ms = (ms + (long2["ms_per_step"] * long2["steps"] - short2["ms_per_step"] * short2["steps"]) / n) / 2
    ranks = 2
comm = (long.get("allreduce_seconds", 0) - short.get("allreduce_seconds", 0)) * 1e3 / n
wait = (long.get("allreduce_wait_seconds", 0) - short.get("allreduce_wait_seconds", 0)) * 1e3 / n
print(f"{ms:.1f} {ranks * batch * 1e3 / ms:.0f} {comm:.2f} {wait:.2f} {long.get('gradient_buckets', 0)}")
PY
}

echo "dist_scaling: ResNet-20, 1 thread per rank, $((steps - warmup)) steady steps (of $steps), $(nproc) cores"
printf '%-11s %-9s %-26s %9s %9s %9s %9s %8s %8s\n' budget buckets run ms/step img/s ratio comm_ms wait_ms buckets
for budget in none 0.5; do
  for bucket in 1024 64; do
    read -r ms1 img1 c1 w1 n1 < <(measure 1 "$batch" --budget "$budget" --bucket-kib "$bucket")
    printf '%-11s %-9s %-26s %9s %9s %9s %9s %8s %8s\n' "$budget" "${bucket}KiB" "1 rank, batch $batch" "$ms1" "$img1" 1.00 "$c1" "$w1" "$n1"
    read -r ms2 img2 c2 w2 n2 < <(measure 2 "$batch" --budget "$budget" --bucket-kib "$bucket")
    printf '%-11s %-9s %-26s %9s %9s %9s %9s %8s %8s\n' "$budget" "${bucket}KiB" "2 ranks, batch $batch each" "$ms2" "$img2" \
      "$(python3 -c "print(f'{$img2 / $img1:.2f}')")" "$c2" "$w2" "$n2"
    read -r ms4 img4 c4 w4 n4 < <(measure 0 "$batch" --budget "$budget" --bucket-kib "$bucket")
    printf '%-11s %-9s %-26s %9s %9s %9s %9s %8s %8s\n' "$budget" "${bucket}KiB" "2 lone procs, batch $batch" "$ms4" "$img4" \
      "$(python3 -c "print(f'{$img4 / $img1:.2f}')")" "-" "-" "-"
    half=$((batch / 2))
    read -r ms3 img3 c3 w3 n3 < <(measure 2 "$half" --budget "$budget" --bucket-kib "$bucket")
    printf '%-11s %-9s %-26s %9s %9s %9s %9s %8s %8s\n' "$budget" "${bucket}KiB" "2 ranks, batch $half each" "$ms3" "$img3" \
      "$(python3 -c "print(f'{$ms1 / $ms3:.2f}')")" "$c3" "$w3" "$n3"
  done
done
echo "ratio: images per second against 1 rank (weak scaling, batch $batch each; two lone processes: their images together)"
echo "       or steps per second (strong scaling, batch $((batch / 2)) each)"
