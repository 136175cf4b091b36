#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Reel with its tests, and runs every test (unit tests,
# CLI tests, and integration tests against a real Ceph cluster that ctest starts and stops).
# Extra arguments go to ctest (e.g. -R storage, -L integration, -LE integration).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a clone in another folder (CI's) reuses
# what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
bash scripts/setup.sh --tests
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREEL_BUILD_TESTS=ON -DREEL_BUILD_BENCH=ON
ninja -C build
cd build
# A test per core: tests that need the whole machine say so (PROCESSORS 2) and run alone.
ctest --output-on-failure --timeout 900 --parallel "$(nproc)" "$@"
