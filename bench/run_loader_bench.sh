#!/usr/bin/env bash
# Builds loader_bench, installs its Python peer (python3-torch, python3-torchvision, python3-av)
# and runs it. Arguments go to loader_bench (--threads, --per-class, --batch, --epochs, --rounds,
# --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-packages.sh python3-torch python3-torchvision python3-av
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build loader_bench
REEL_SOURCE_DIR=$PWD ./build/bench/loader_bench "$@"
