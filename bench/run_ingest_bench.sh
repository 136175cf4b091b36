#!/usr/bin/env bash
# Builds ingest_bench, installs its Python peers (OpenCV, PyAV) and runs it. Arguments go to
# ingest_bench (--threads, --per-class, --clip-frames, --short-side, --keep DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for p in python3-opencv python3-av; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="${missing:-} $p"
done
if [ -n "${missing:-}" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build ingest_bench
REEL_SOURCE_DIR=$PWD ./build/bench/ingest_bench "$@"
