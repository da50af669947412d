#!/usr/bin/env bash
# One training step of the CIFAR ResNet-32 (batch 32) and of a 784-1024-1024-10 MLP (batch 128)
# in remat (bench/compare_ours.cpp) and in PyTorch 1.13 (bench/compare_torch.py), at one thread
# and at two.  The three workers (ours, PyTorch at its defaults, PyTorch at its best: glibc malloc
# never returning memory to the kernel, and OpenBLAS's SkylakeX kernels where the CPU has
# AVX-512) stay up and are alternated in rounds, so machine drift hits all of them alike.
# Prints, per model, "MODEL ours_ms torch_ms ratio" with the faster PyTorch setting, the
# default-settings time, and the MLP's GFLOP/s (forward + backward = 3 x 2 x MACs).  The small-op
# models (lstm_cell, treelstm: bench/small_op_models.cpp) and the language models (lstm_lm,
# transformer_lm: bench/lm_workloads.cpp) run likewise; every model also runs at two threads
# (lines MODEL@2: ours against the fastest of PyTorch's defaults and its tuned settings with passive
# or active OpenMP waiting), and ours alone under budgets, each a fraction of the model's own peak, against our
# unbudgeted step, with the search time: lstm_cell at BUDGET_LSTM (0.3), treelstm at
# BUDGET_TREELSTM (0.5), both language models at 0.5 and 0.3 (a fraction below what the
# constants need prints "infeasible" with the pool's account).  Last, the smallest feasible
# budget of each language model on a grid of 0.05 (a fresh worker per try, two steps each).
# Usage: BUILD_DIR=build ROUNDS=4 STEPS=5 bench/compare_torch.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-build}
[[ $build = /* ]] || build=$root/$build
rounds=${ROUNDS:-4}
steps=${STEPS:-5}
warmup=${WARMUP:-3}
python=/usr/bin/python3

die() {
  echo "compare_torch.sh: $*" >&2
  exit 1
}
trap 'die "line $LINENO: \"$BASH_COMMAND\" failed"' ERR

if ! err=$("$python" -c 'import torch' 2>&1); then
  die "$python cannot import torch (install python3-torch, e.g. REMAT_WITH_TORCH=1 scripts/setup.sh): ${err##*$'\n'}"
fi

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake configure of $build failed"
fi
cmake --build "$build" --target compare_ours -j"${JOBS:-1}" >/dev/null || die "building compare_ours in $build failed"
ours=$build/bench/compare_ours
[[ -x $ours ]] || die "$ours was not built"

# One thread everywhere (compare_ours and compare_torch.py also set it themselves).
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 REMAT_NUM_THREADS=1
best_env=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=17179869184)
if grep -qw avx512f /proc/cpuinfo; then
  best_env+=(OPENBLAS_CORETYPE=SkylakeX)
  coretype_note="OPENBLAS_CORETYPE=SkylakeX (the CPU has AVX-512)"
else
  coretype_note="no OPENBLAS_CORETYPE: the CPU has no AVX-512 (AVX2 at most), so SkylakeX kernels cannot run"
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

workers=(ours torch_default torch_best)
declare -A in_fd out_fd
# Starts a worker on a pair of FIFOs and waits for its "ready".
start() {
  local name=$1 fd line
  shift
  mkfifo "$tmp/$name.in" "$tmp/$name.out"
  "$@" <"$tmp/$name.in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  exec {fd}>"$tmp/$name.in"
  in_fd[$name]=$fd
  exec {fd}<"$tmp/$name.out"
  out_fd[$name]=$fd
  if ! read -r -t 900 -u "${out_fd[$name]}" line || [[ $line != ready ]]; then
    die "worker $name did not start: $(cat "$tmp/$name.err")"
  fi
}

# The BLAS PyTorch's CPU library resolves to decides its matmul (and so the MLP) speed.
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')
torch_blas=$(ldd "$torch_lib" 2>/dev/null | awk '/libblas|openblas|libmkl|blis/ && !found { print $3; found = 1 }' || true)
if [[ -n $torch_blas ]]; then torch_blas=$(readlink -f "$torch_blas"); fi

echo "compare_torch: $rounds rounds x $steps steps per model and worker after $warmup warm-up steps, one thread"
echo "  PyTorch $("$python" -c 'import torch; print(torch.__version__)'), BLAS: ${torch_blas:-unknown}"
echo "  PyTorch best: ${best_env[*]}; $coretype_note"
start ours "$ours" --threads 1 --warmup "$warmup"
start torch_default "$python" "$root/bench/compare_torch.py" --threads 1 --warmup "$warmup"
start torch_best env "${best_env[@]}" "$python" "$root/bench/compare_torch.py" --threads 1 --warmup "$warmup"

# Rounds of every model on every worker, rotating who goes first; step times go to
# $tmp/<worker>.<model>.  Between two workers a pause (PAUSE, 0.3 s) lets the last one's idle
# threads (libgomp's and OpenBLAS's spin a while before they sleep) stop competing for the cores.
# Usage: run_rounds workers_array models_array
run_rounds() {
  local -n ws=$1 ms=$2
  local r k w model line
  for ((r = 0; r < rounds; r++)); do
    for model in "${ms[@]}"; do
      for ((k = 0; k < ${#ws[@]}; k++)); do
        w=${ws[(k + r) % ${#ws[@]}]}
        sleep "${PAUSE:-0.3}"
        echo "$model $steps" >&"${in_fd[$w]}"
        read -r -t 900 -u "${out_fd[$w]}" line || die "worker $w stopped: $(cat "$tmp/$w.err")"
        set -- $line
        [[ $1 = "$model" ]] || die "worker $w answered: $line"
        shift
        printf '%s\n' "$@" >>"$tmp/$w.$model"
      done
    done
  done
  for w in "${ws[@]}"; do echo quit >&"${in_fd[$w]}"; done
}

models=(resnet32 mlp lstm_cell treelstm lstm_lm transformer_lm)
run_rounds workers models

# Two threads, every model: ours (with its default waiting policy, ensure_thread_policy) against
# PyTorch at its defaults and at the tuned settings with passive and with active OpenMP waiting
# (which of the three is fastest differs by model), alternated likewise.  The active-waiting
# worker runs last and alone: its idle threads spin on both cores and would slow every other.
workers2=(ours@2 torch@2 torch@2_passive)
workers2_active=(torch@2_active)
threads2=(OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2)
start ours@2 env "${threads2[@]}" REMAT_NUM_THREADS=2 "$ours" --threads 2 --warmup "$warmup"
start torch@2 env "${threads2[@]}" "$python" "$root/bench/compare_torch.py" --threads 2 \
  --warmup "$warmup"
start torch@2_passive env "${threads2[@]}" "${best_env[@]}" OMP_WAIT_POLICY=PASSIVE "$python" \
  "$root/bench/compare_torch.py" --threads 2 --warmup "$warmup"
run_rounds workers2 models
start torch@2_active env "${threads2[@]}" "${best_env[@]}" OMP_WAIT_POLICY=ACTIVE "$python" \
  "$root/bench/compare_torch.py" --threads 2 --warmup "$warmup"
run_rounds workers2_active models

# Under a budget: one worker per model, so each budget is a fraction of that model's own peak.
budget_lines=()
# Usage: run_budget MODEL FRACTION STEPS; appends the worker's answer to budget_lines.
run_budget() {
  local name="budget_$1_${2/./_}" line
  start "$name" "$ours" --threads 1 --warmup "$warmup" --models "$1"
  echo "budget $1 $3 $2" >&"${in_fd[$name]}"
  read -r -t 1800 -u "${out_fd[$name]}" line || die "budgeted $1 stopped: $(cat "$tmp/$name.err")"
  echo quit >&"${in_fd[$name]}"
  budget_lines+=("$line")
}
for spec in "lstm_cell ${BUDGET_LSTM:-0.3}" "treelstm ${BUDGET_TREELSTM:-0.5}" "lstm_lm 0.5" \
  "lstm_lm 0.3" "transformer_lm 0.5" "transformer_lm 0.3"; do
  set -- $spec
  run_budget "$1" "$2" $((rounds * steps))
done
# The smallest feasible fraction: down from 0.95 until a step runs out of budget (their
# parameters, gradients and Adam's moments alone are about 0.35 and 0.45 of the peak).
smallest=()
for model in lstm_lm transformer_lm; do
  ok=none
  for f in 0.95 0.90 0.85 0.80 0.75 0.70 0.65 0.60 0.55 0.50 0.45 0.40 0.35 0.30 0.25 0.20; do
    run_budget "$model" "$f" 2
    set -- ${budget_lines[-1]}
    unset 'budget_lines[-1]'
    [[ $4 = infeasible ]] && break
    ok=$f
  done
  smallest+=("$model $ok")
done
wait

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# MACs of one MLP step's forward pass: batch 128 through 784-1024-1024-10.
mlp_gflop=$(awk 'BEGIN { printf "%.6f", 3 * 2 * 128 * (784 * 1024 + 1024 * 1024 + 1024 * 10) / 1e9 }')
echo "medians of $((rounds * steps)) steps, ms per step:"
printf '  %-9s %9s %14s %14s\n' model ours torch_default torch_best
for model in "${models[@]}"; do
  printf '  %-9s %9.2f %14.2f %14.2f\n' "$model" "$(median "$tmp/ours.$model")" \
    "$(median "$tmp/torch_default.$model")" "$(median "$tmp/torch_best.$model")"
done
echo "MODEL ours_ms torch_ms ratio (torch_ms: the faster PyTorch setting; ratio = ours / torch)"
for model in "${models[@]}"; do
  o=$(median "$tmp/ours.$model") d=$(median "$tmp/torch_default.$model") b=$(median "$tmp/torch_best.$model")
  awk -v m="$model" -v o="$o" -v d="$d" -v b="$b" 'BEGIN {
    t = b < d ? b : d
    printf "%s %.2f %.2f %.3f  (torch defaults %.2f ms, best setting: %s)\n", m, o, t, o / t, d, b < d ? "tuned" : "defaults"
  }'
done
for model in "${models[@]}"; do
  o=$(median "$tmp/ours@2.$model") o1=$(median "$tmp/ours.$model")
  d=$(median "$tmp/torch@2.$model") p=$(median "$tmp/torch@2_passive.$model")
  a=$(median "$tmp/torch@2_active.$model") t1=$(median "$tmp/torch_best.$model")
  awk -v m="$model@2" -v o="$o" -v o1="$o1" -v d="$d" -v p="$p" -v a="$a" -v t1="$t1" 'BEGIN {
    t = d; s = "defaults"
    if (p < t) { t = p; s = "tuned, passive" }
    if (a < t) { t = a; s = "tuned, active" }
    printf "%s %.2f %.2f %.3f  (torch defaults %.2f, tuned passive %.2f, tuned active %.2f; two threads / one: ours %.2fx, torch %.2fx faster)\n", m, o, t, o / t, d, p, a, o1 / o, t1 / t
  }'
done
awk -v g="$mlp_gflop" -v o="$(median "$tmp/ours.mlp")" -v d="$(median "$tmp/torch_default.mlp")" \
  -v b="$(median "$tmp/torch_best.mlp")" 'BEGIN {
  printf "mlp GFLOP/s (%.3f GFLOP per step = 3 x 2 x MACs): ours %.1f, torch defaults %.1f, torch tuned %.1f\n",
    g, g / (o / 1e3), g / (d / 1e3), g / (b / 1e3)
}'
echo "BUDGET model fraction ours_unbudgeted_ms ours_budgeted_ms slowdown search_share evictions recomputed_ops budget_bytes"
for line in "${budget_lines[@]}"; do
  set -- $line
  if [[ $4 = infeasible ]]; then
    echo "BUDGET $2 $3 infeasible: ${*:5}"
    continue
  fi
  awk -v m="$2" -v f="$3" -v u="$4" -v b="$5" -v s="$6" -v n="$7" -v e="$8" -v r="$9" -v bb="${10}" 'BEGIN {
    printf "BUDGET %s %s %.2f %.2f %.2fx %.1f%% %d %d %d\n", m, f, u, b, b / u, 100 * s / (n * b / 1e3), e, r, bb
  }'
done
echo "SMALLEST model fraction (the smallest of 0.95, 0.90, ... 0.20 at which two steps ran)"
for line in "${smallest[@]}"; do echo "SMALLEST $line"; done
