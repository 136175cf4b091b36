#!/usr/bin/env bash
# Builds ingest_bench, installs its Python peers (OpenCV, PyAV) and runs it. Arguments go to
# ingest_bench (--threads, --per-class, --clip-frames, --short-side, --keep DIR, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-packages.sh python3-opencv python3-av
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build ingest_bench
REEL_SOURCE_DIR=$PWD ./build/bench/ingest_bench "$@"
