#!/usr/bin/env bash
# Builds serve_bench and runs it as `reel serve` runs: OpenMP threads that sleep between batches
# (OMP_WAIT_POLICY=PASSIVE), LibTorch threads = cores. Arguments go to serve_bench
# (--seconds S per row, --threads N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREEL_BUILD_BENCH=ON >/dev/null
ninja -C build serve_bench
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} ./build/bench/serve_bench "$@"
