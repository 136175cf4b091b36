#!/usr/bin/env bash
# Builds storage_bench, starts a throw-away Ceph cluster on loopback, runs the benchmark against
# it and the local disk, and stops the cluster. Extra arguments go to storage_bench.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build storage_bench
CEPH_DIR=$(mktemp -d -u /tmp/reel-bench-ceph-XXXXXX)
trap 'bash scripts/ceph-cluster.sh stop "$CEPH_DIR"' EXIT
bash scripts/ceph-cluster.sh start "$CEPH_DIR" >/dev/null
# shellcheck disable=SC1091
source "$CEPH_DIR/env"
./build/bench/storage_bench "$@"
