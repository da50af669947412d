#!/usr/bin/env bash
# Checks the layering of DESIGN.md section 2: a folder includes only from itself and the folders
# below it.  Prints each offending #include and exits 1 when there is one.
# Usage: scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [core]="core"
  [dtr]="core dtr"
  [autograd]="core autograd"
  [ops]="core dtr autograd ops"
  [nn]="core dtr autograd ops nn"
  [models]="core dtr autograd ops nn models"
  [dist]="core dtr autograd ops nn dist"
  [sim]="core dtr sim"
)
project_dirs="core dtr autograd ops nn models dist sim examples tests tools bench"
bad=0
for layer in "${!allowed[@]}"; do
  while IFS=: read -r file line text; do
    target=$(sed -E 's/^#include "([^/"]+)\/.*/\1/' <<<"$text")
    [[ " $project_dirs " == *" $target "* ]] || continue  # a library's header, or a file beside it
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "layering: $file:$line includes from $target/, which $layer/ may not (allowed: ${allowed[$layer]})"
      bad=1
    fi
  done < <(git ls-files "$layer" | grep -E '\.(h|cpp|cu|cuh)$' | xargs -r grep -nE '^#include "[^/"]+/' /dev/null || true)
done
[ $bad -eq 0 ] && echo "layering: every include respects DESIGN.md section 2"
exit $bad
