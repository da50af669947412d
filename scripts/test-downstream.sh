#!/usr/bin/env bash
# Builds and runs examples/downstream as a user's project would: against `cmake --install` of
# the build folder in a temporary prefix (find_package(remat)), and with --subdirectory also
# through add_subdirectory of this checkout.  Both compile with -Wall -Wextra -Werror.
# Usage: scripts/test-downstream.sh [--subdirectory]     (BUILD_DIR=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S examples/downstream -B "$tmp/installed" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  "${launcher[@]}" >/dev/null
cmake --build "$tmp/installed" -j "$(nproc)"
"$tmp/installed/downstream"
echo "downstream: find_package(remat) from an install works"

if [ "${1:-}" = --subdirectory ]; then
  cmake -S examples/downstream -B "$tmp/subdirectory" -DCMAKE_BUILD_TYPE=Release -DREMAT_SOURCE_DIR="$PWD" \
    "${launcher[@]}" >/dev/null
  cmake --build "$tmp/subdirectory" -j "$(nproc)"
  "$tmp/subdirectory/downstream"
  echo "downstream: add_subdirectory(remat) works"
fi
