#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over Reel's own sources, with the compile commands of a build folder
# (default: build). Fails on any finding. Usage: scripts/check-tidy.sh [BUILD_DIR] [JOBS]
#
# A file clang-tidy passed is remembered under $REEL_TIDY_CACHE (default ~/.cache/reel-tidy) by
# a hash of all that clang-tidy reads: its version, .clang-tidy, the compile command and the
# preprocessed source (so every included header too). An unchanged file is not linted again: a
# full run takes about 9 minutes of a 2-core machine, a changed file seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${2:-$(nproc)}
cache=${REEL_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reel-tidy}
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure first"; exit 3; }
mkdir -p "$cache"
mapfile -t files < <(git ls-files 'src/*.cc' 'apps/*.cc' | grep -v '_test\.cc$')
# Writes $build/tidy/compile_commands.json (a file per entry, unity batches split) and prints a
# key per file.
mkdir -p "$build/tidy"
python3 scripts/tidy_prepare.py "$build" "$jobs" "${files[@]/#/$PWD/}" > "$build/tidy/keys.txt"
mapfile -t keyed < "$build/tidy/keys.txt"
((${#keyed[@]} == ${#files[@]})) ||
  echo "clang-tidy: $((${#files[@]} - ${#keyed[@]})) of ${#files[@]} files are not in $build (parts left out)"

todo=()
for line in "${keyed[@]}"; do
  [ -e "$cache/${line%% *}" ] || todo+=("${line#* }")
done
rc=0
: > "$build/tidy/report.txt"
if ((${#todo[@]} > 0)); then
  run-clang-tidy -quiet -p "$build/tidy" -j "$jobs" "${todo[@]}" > "$build/tidy/report.txt" 2>&1 || rc=$?
fi
sed -e 's/\x1b\[[0-9;]*m//g' "$build/tidy/report.txt" | grep -E "(warning|error): .*\[[a-z-]+.*\]$" |
  sort -u > "$build/tidy/findings.txt" || true
if [ -s "$build/tidy/findings.txt" ]; then
  cat "$build/tidy/findings.txt"
  echo "clang-tidy: $(wc -l < "$build/tidy/findings.txt") findings in ${#files[@]} files"
  exit 1
fi
if ((rc != 0)); then
  tail -20 "$build/tidy/report.txt"
  echo "clang-tidy: run-clang-tidy failed (exit $rc) with no finding; see $build/tidy/report.txt"
  exit 1
fi
# Only a clean run is remembered: a finding in a header belongs to every file that includes it.
for line in "${keyed[@]}"; do : > "$cache/${line%% *}"; done
echo "clang-tidy: ${#files[@]} files clean (${#todo[@]} linted; the rest as in an earlier clean run)"
