#!/usr/bin/env bash
# Fails, listing the files, when a tracked C++ file differs from what clang-format (.clang-format)
# makes of it. `scripts/check-format.sh --fix` formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h'; git ls-files --others --exclude-standard '*.cc' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "not formatted (run scripts/check-format.sh --fix): ${bad[*]}"
  exit 1
fi
echo "format: ${#files[@]} files formatted as .clang-format says"
