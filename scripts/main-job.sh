#!/usr/bin/env bash
# The main job: installs what is needed, builds the examples, and trains ResNet-20 on
# Fashion-MNIST for three epochs (about 4 minutes on two cores here, test accuracy above 92%)
# under half of its unbudgeted peak memory.  Extra arguments go to
# train_resnet (e.g. --budget 0.3, --threads 2, --steps 50).  It ends by drawing
# $BUILD_DIR/main-job.png with gnuplot (memory over one budgeted step against the budget and the
# unbudgeted step, and the loss and test accuracy); --plot PATH draws it elsewhere, --no-plot not
# at all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${BUILD_DIR:-build}"
plot=(--plot "$build/main-job.png")
args=()
for a in "$@"; do
  case "$a" in
    --no-plot) plot=() ;;
    --plot | --plot=*)
      plot=()
      args+=("$a")
      ;;
    *) args+=("$a") ;;
  esac
done
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target train_resnet
exec "$build/examples/train_resnet" --model resnet20 --epochs 3 --budget 0.5 "${plot[@]}" "${args[@]}"
