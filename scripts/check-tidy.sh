#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over Reel's own sources, with the compile commands of a build folder
# (default: build). Fails on any finding. Usage: scripts/check-tidy.sh [BUILD_DIR] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${2:-$(nproc)}
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure first"; exit 3; }
# GCC's precompiled headers mean nothing to clang: drop them from the commands clang-tidy reads.
mkdir -p "$build/tidy"
sed -e 's/ -Winvalid-pch//g' -e 's/ -include [^ ]*cmake_pch\.hxx//g' \
  "$build/compile_commands.json" > "$build/tidy/compile_commands.json"
mapfile -t files < <(git ls-files 'src/*.cc' 'apps/*.cc' | grep -v '_test\.cc$')
run-clang-tidy -quiet -p "$build/tidy" -j "$jobs" "${files[@]/#/$PWD/}" > "$build/tidy/report.txt" 2>&1 || true
sed -e 's/\x1b\[[0-9;]*m//g' "$build/tidy/report.txt" | grep -E "(warning|error): .*\[[a-z-]+.*\]$" |
  sort -u > "$build/tidy/findings.txt" || true
if [ -s "$build/tidy/findings.txt" ]; then
  cat "$build/tidy/findings.txt"
  echo "clang-tidy: $(wc -l < "$build/tidy/findings.txt") findings in ${#files[@]} files"
  exit 1
fi
echo "clang-tidy: ${#files[@]} files clean"
