#!/usr/bin/env bash
# Builds registry_bench and `reel`, installs the tools it measures the registry against (git-lfs,
# borgbackup and casync from Debian, and the openssl command line; each only when missing) and
# runs it: bytes added per version of R(2+1)D-18 for Reel, one safetensors file per version,
# git-lfs, borg and casync; hash, push and pull throughput; listing latency with 10,000 versions.
# About 5 minutes on 2 cores. Arguments go to registry_bench (--json FILE, --threads N, --keep,
# ...; see bench/registry_bench.cc). REEL_BUILD_DIR picks the build folder (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-packages.sh git git-lfs borgbackup casync openssl
BUILD=${REEL_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$BUILD" registry_bench reel
# LibTorch's OpenMP workers sleep when idle instead of spinning: the registry's pushes, pulls and
# the peers run between training steps, on the same cores. registry_bench itself trains with one
# LibTorch thread per core, never more (--threads lowers it).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
echo "registry_bench on $(nproc) cores, OMP_WAIT_POLICY=$OMP_WAIT_POLICY," \
  "$(git --version), $(git lfs version | cut -d' ' -f1), $(borg --version), casync $(casync --version | head -n1 | awk '{print $NF}')"
start=$(date +%s)
"./$BUILD/bench/registry_bench" --reel "$PWD/$BUILD/apps/reel/reel" "$@"
echo "registry_bench took $(( $(date +%s) - start )) s"
