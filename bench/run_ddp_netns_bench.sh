#!/usr/bin/env bash
# ddp_bench across two "nodes": two network namespaces joined by a veth pair (made here, removed
# on exit), one ddp_bench launcher in each, Gloo over the veth. Then the same sizes on loopback
# in one namespace-less run, for comparison. Needs root (CAP_NET_ADMIN).
# Usage: bench/run_ddp_netns_bench.sh [--ranks 2,4] [other ddp_bench flags, e.g. --json FILE]
# (--ranks sizes must be even: the ranks are split over the two nodes).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${DDP_BENCH:-build/bench/ddp_bench}
[[ -x "$BENCH" ]] || ninja -C build ddp_bench
ARGS=("$@")
[[ " ${ARGS[*]} " == *" --ranks "* ]] || ARGS=(--ranks 2,4 "${ARGS[@]}")
# Node 1 gets the same flags minus --json (node 0 reports).
NODE1_ARGS=()
skip=0
for a in "${ARGS[@]}"; do
  if ((skip)); then skip=0; continue; fi
  if [[ "$a" == --json ]]; then skip=1; continue; fi
  NODE1_ARGS+=("$a")
done

source scripts/netns_pair.sh
NS0=reel-bench-n0-$$
NS1=reel-bench-n1-$$
trap 'netns_pair_down "$NS0" "$NS1"' EXIT
if ! netns_pair_up "$NS0" "$NS1" "rb0-$$" "rb1-$$" 10.232.0.1 10.232.0.2; then
  echo "run_ddp_netns_bench: cannot create network namespaces (needs root and iproute2)" >&2
  exit 1
fi

PORT=29611
echo "== two nodes (network namespaces, veth) =="
ip netns exec "$NS1" env GLOO_SOCKET_IFNAME="rb1-$$" "$BENCH" --skip-r2plus1d-18 \
  "${NODE1_ARGS[@]}" --nnodes 2 --node-rank 1 --master-addr 10.232.0.1 --master-port $PORT \
  > "${NODE1_LOG:-/dev/null}" 2>&1 &
node1=$!
ip netns exec "$NS0" env GLOO_SOCKET_IFNAME="rb0-$$" "$BENCH" --skip-r2plus1d-18 \
  "${ARGS[@]}" --nnodes 2 --node-rank 0 --master-addr 10.232.0.1 --master-port $PORT
wait $node1
echo "== one node (loopback) =="
NO_JSON=("${NODE1_ARGS[@]}")
"$BENCH" --skip-r2plus1d-18 "${NO_JSON[@]}"
