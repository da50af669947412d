#!/usr/bin/env bash
# The one command that installs what is needed, configures, builds and runs the whole test
# suite.  Usage: scripts/test.sh   (BUILD_DIR=... to build elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${BUILD_DIR:-build}"
jobs="$(nproc)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure -j "$jobs"
