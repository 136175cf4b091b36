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
command -v clang-format > /dev/null || { echo "check-format: clang-format is not installed"; exit 1; }
# Batches of files per clang-format process, two at a time: one process per file spent a
# minute of CI starting processes. A file that differs is named in a "file:line:col: error" line.
mapfile -t bad < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 64 -P 2 clang-format --dry-run --Werror 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format-violations.*/\1/p' | sort -u)
if ((${#bad[@]})); then
  echo "not formatted (run scripts/check-format.sh --fix): ${bad[*]}"
  exit 1
fi
echo "format: ${#files[@]} files formatted as .clang-format says"
