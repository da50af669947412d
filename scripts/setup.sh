#!/usr/bin/env bash
# Installs the Debian 12 packages the build, tests, benchmarks and examples need.
# Runs apt-get only when something is missing, so repeated runs are fast.
set -euo pipefail
packages=(
  build-essential cmake ccache pkg-config
  libdnnl-dev libeigen3-dev libfmt-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  coinor-libcbc-dev libzip-dev gnuplot-nox
)
# Data-parallel training over MPI (dist/, examples under mpirun, the two-rank tests).
packages+=(libopenmpi-dev openmpi-bin)
# The sanitizer build and the fuzz targets: clang with libFuzzer and its OpenMP runtime.
packages+=(clang libclang-rt-14-dev libomp-14-dev)
# The format check (scripts/check-format.sh).
packages+=(clang-format)
# Fashion-MNIST for the main job and the data tests (which skip, saying so, without it).
packages+=(dataset-fashion-mnist)
# The fortunes corpus for the language models (examples/train_lm and its tests).
packages+=(fortunes)
# Optional extras: PyTorch for regenerating test fixtures and for bench/ comparisons.
if [ "${REMAT_WITH_TORCH:-0}" = 1 ]; then packages+=(python3-torch libopenblas0-pthread); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
else
  echo "setup: all packages present"
fi
