#!/usr/bin/env bash
# Installs the named Debian packages that are missing (benchmark peers and other extras that the
# main setup does not need). Usage: install-packages.sh PACKAGE...
set -euo pipefail
# One dpkg-query for all of them; a package it does not know is missing too.
# dpkg-query exits non-zero when it knows some of them not at all: that is an answer, not a failure.
installed=$( (dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true) | awk '/ install ok installed$/ {print $1}')
missing=()
for p in "$@"; do
  grep -qx "$p" <<<"$installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "installing ${#missing[@]} packages: ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
