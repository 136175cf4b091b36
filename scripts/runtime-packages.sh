#!/usr/bin/env bash
# The Debian packages that hold the libraries BINARY links directly, one per line: what a runtime
# image installs for it (apt brings what those need). Used by the Dockerfile's build stage, so
# that the image's package list always follows what the binary really links.
# Usage: scripts/runtime-packages.sh BINARY
set -euo pipefail
binary=${1:?usage: runtime-packages.sh BINARY}
owner() {  # owner PATH: its package, trying the path as dpkg may know it (merged /usr or not)
  local path=$1 real
  real=$(readlink -f "$path")
  for p in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
    if dpkg -S "$p" > /dev/null 2>&1; then
      dpkg -S "$p" | awk -F: 'NR == 1 {print $1}'
      return 0
    fi
  done
  echo "runtime-packages.sh: no package holds $path" >&2
  return 1
}
objdump -p "$binary" | awk '$1 == "NEEDED" {print $2}' | while read -r lib; do
  path=$(ldconfig -p | awk -v lib="$lib" '$1 == lib && !found {print $NF; found = 1}')
  if [[ -z "$path" ]]; then
    echo "runtime-packages.sh: $binary needs $lib, which is not installed" >&2
    exit 1
  fi
  owner "$path"
done | sort -u
