#!/usr/bin/env bash
# Builds loader_bench, installs its Python peer (python3-torch, python3-torchvision, python3-av)
# and runs it. Arguments go to loader_bench (--threads, --per-class, --batch, --epochs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
missing=""
for p in python3-torch python3-torchvision python3-av; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build loader_bench
REEL_SOURCE_DIR=$PWD ./build/bench/loader_bench "$@"
