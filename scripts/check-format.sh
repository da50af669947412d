#!/usr/bin/env bash
# clang-format --dry-run -Werror on every C++ file changed since the commit where the format
# check began (files untouched since keep their older layout until they change).
# Usage: scripts/check-format.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-8eeee28}"
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format not found (apt-get install clang-format): check skipped"
  exit 0
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "format: commit $base is not in this clone's history: check skipped"
  exit 0
fi
mapfile -t files < <( (git diff --name-only --diff-filter=d "$base"; git ls-files --others --exclude-standard) |
                       sort -u | grep -E '\.(cpp|h|cu|cuh)$' || true)
bad=0
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || { echo "format: $f differs from clang-format's layout"; bad=1; }
done
[ $bad -eq 0 ] && echo "format: ${#files[@]} changed C++ files follow .clang-format"
exit $bad
