#!/usr/bin/env bash
# The Philly trace (82,247 jobs) replayed through the scheduler's core under every policy, with
# and without backfill (`reel sched simulate`), and the time the whole table takes against the
# issue's limit of 60 s. One thread (the simulator is sequential); prints the machine it ran on.
# Usage: bench/run_sched_simulate_bench.sh [--nodes N] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build reel >/dev/null
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); threads used: 1"
start=$(date +%s%N)
build/apps/reel/reel sched simulate --trace testdata/traces/philly.csv "$@"
end=$(date +%s%N)
awk -v ns=$((end - start)) 'BEGIN {
  s = ns / 1e9
  printf "wall, reading the trace included: %.1f s; limit 60 s; %.2fx of the limit (lower is better)\n", s, s / 60
}'
