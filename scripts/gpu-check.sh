#!/usr/bin/env bash
# The GPU checks in two halves, because the machine with the GPU has no package registry:
#   scripts/gpu-check.sh prepare   here: a Release build with the CUDA backend (build-gpu/), then
#                                  build-gpu-carry/ with what the GPU machine needs and lacks: the
#                                  CUDA test binary, train_mlp for the benchmark, and the shared
#                                  libraries they link from Debian (oneDNN, fmt, OpenCL ICD
#                                  loader, libgomp, Open MPI's, loaded but not started by a
#                                  single process); it prints its size (the device tool carries at
#                                  most 64 MiB).
#   scripts/gpu-check.sh run       there, from the repository root, with build-gpu-carry/
#                                  carried: finds cuBLAS, cuDNN and the CUDA runtime (the image
#                                  has them as Python wheels under its PyTorch), runs the CUDA
#                                  tests, then bench/gpu_mlp.sh (ours against the image's
#                                  PyTorch, and under budgets), and prints a summary to quote.
#                                  The tests stop after GPU_CHECK_SECONDS (300), the benchmark
#                                  after GPU_BENCH_SECONDS (180).
# Usage (device tool): run(command="scripts/gpu-check.sh run", carry=["build-gpu-carry"]).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
carry=build-gpu-carry

prepare() {
  scripts/setup.sh
  # Portable: the GPU machine's CPU need not have this one's instructions.
  # The whole configure output first: grep -q would close the pipe early, and under pipefail
  # cmake's broken pipe would read as a failure.
  local configure
  configure=$(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DREMAT_CUDA=ON -DREMAT_PORTABLE=ON \
    -DREMAT_BUILD_BENCH=OFF -DREMAT_BUILD_EXAMPLES=ON)
  if ! grep -q "CUDA backend: nvcc" <<<"$configure"; then
    echo "gpu-check: CMake did not enable the CUDA backend (nvcc, cuBLAS or cuDNN missing)" >&2
    exit 1
  fi
  cmake --build build-gpu -j "$(nproc)" --target test_cuda train_mlp
  rm -rf "$carry"
  mkdir -p "$carry/lib"
  cp build-gpu/tests/test_cuda build-gpu/examples/train_mlp "$carry/"
  strip "$carry/test_cuda" "$carry/train_mlp"
  # Debian libraries the binaries link that a CUDA + PyTorch image does not have.
  ldd "$carry/test_cuda" "$carry/train_mlp" | awk '/=>/ { print $3 }' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libdnnl.so* | libfmt.so* | libOpenCL.so* | libgomp.so* | libz.so* | libzip.so* | \
        libmpi.so* | libopen-rte.so* | libopen-pal.so* | libhwloc.so* | libevent*.so* | libudev.so*)
        cp -L "$lib" "$carry/lib/" ;;
    esac
  done
  echo "gpu-check: $carry holds $(du -sm "$carry" | cut -f1) MiB:"
  ls -la "$carry" "$carry/lib"
}

run() {
  [[ -x $carry/test_cuda ]] || {
    echo "gpu-check: $carry/test_cuda is missing: run 'scripts/gpu-check.sh prepare' here and carry $carry" >&2
    exit 2
  }
  # cuBLAS, cuDNN and the runtime from the Python wheels (nvidia/*/lib), else the system's.
  local libs="$PWD/$carry/lib"
  for d in $(python3 -c 'import glob, os, site; print(" ".join(sorted({os.path.dirname(p) for s in site.getsitepackages() for p in glob.glob(os.path.join(s, "nvidia", "*", "lib", "lib*.so*"))})))' 2>/dev/null); do
    libs="$libs:$d"
  done
  [[ -d /usr/local/cuda/lib64 ]] && libs="$libs:/usr/local/cuda/lib64"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "== gpu-check on $(hostname), $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null ||
    echo "nvidia-smi: not available"
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>/dev/null || true
  local missing
  missing=$(ldd "$carry/test_cuda" "$carry/train_mlp" | awk '/not found/ { print $1 }' | tr '\n' ' ')
  if [[ -n $missing ]]; then
    echo "gpu-check: libraries not found: $missing" >&2
    exit 3
  fi
  local status=0
  local log="$carry/gpu-check.log"
  timeout "${GPU_CHECK_SECONDS:-300}" "$carry/test_cuda" --gtest_brief=1 2>&1 | tee "$log" || status=$?
  local bench_status=0
  TRAIN_MLP="$carry/train_mlp" timeout "${GPU_BENCH_SECONDS:-180}" bench/gpu_mlp.sh 2>&1 |
    tee "$carry/gpu-bench.log" || bench_status=$?
  # The device tool brings $OUT back.
  [[ -n ${OUT:-} && -d ${OUT:-} ]] && cp "$log" "$carry/gpu-bench.log" "$OUT/"
  echo "== summary"
  grep -E "^\[  (PASSED|FAILED|SKIPPED)  \]|tests? ran" "$log" || true
  grep -E "^(ours|pytorch) |^ours / PyTorch|failed" "$carry/gpu-bench.log" || true
  echo "test_cuda exit status $status; bench/gpu_mlp.sh exit status $bench_status"
  exit "$status"
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh prepare|run" >&2; exit 2 ;;
esac
