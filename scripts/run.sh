#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds `reel`, and runs the main job on embedded defaults:
# local storage under ./reel-data, this machine only. Arguments go to `reel smoke`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build reel
exec ./build/apps/reel/reel smoke "$@"
