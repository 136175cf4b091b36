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

NS0=reel-bench-n0-$$
NS1=reel-bench-n1-$$
cleanup() {
  for ns in "$NS0" "$NS1"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT
if ! ip netns add "$NS0" 2>/dev/null; then
  echo "run_ddp_netns_bench: cannot create network namespaces (needs root and iproute2)" >&2
  exit 1
fi
ip netns add "$NS1"
ip link add "rb0-$$" type veth peer name "rb1-$$"
ip link set "rb0-$$" netns "$NS0"
ip link set "rb1-$$" netns "$NS1"
ip -n "$NS0" addr add 10.232.0.1/24 dev "rb0-$$"
ip -n "$NS1" addr add 10.232.0.2/24 dev "rb1-$$"
for ns in "$NS0" "$NS1"; do ip -n "$ns" link set lo up; done
ip -n "$NS0" link set "rb0-$$" up
ip -n "$NS1" link set "rb1-$$" up

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
