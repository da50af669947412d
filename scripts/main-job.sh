#!/usr/bin/env bash
# The main job: installs what is needed, builds the examples, and trains ResNet-20 on
# Fashion-MNIST for one epoch under half of its unbudgeted peak memory.  Extra arguments go to
# train_resnet (e.g. --budget 0.3, --threads 2, --steps 50).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target train_resnet
exec "$build/examples/train_resnet" --model resnet20 --epochs 1 --budget 0.5 "$@"
