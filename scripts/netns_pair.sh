# Two network namespaces joined by a veth pair: two "nodes" on one host, for the multi-node
# training test and benchmark. Source it; needs root (CAP_NET_ADMIN) and iproute2.
#   netns_pair_up NS0 NS1 IF0 IF1 ADDR0 ADDR1   (addresses in one /24, e.g. 10.231.0.1 10.231.0.2)
#   netns_pair_down NS0 NS1                     (kills what runs inside, removes both; the veth goes with them)
# netns_pair_up returns 1, having made nothing, where namespaces cannot be made here.

netns_pair_up() {
  local ns0=$1 ns1=$2 if0=$3 if1=$4 addr0=$5 addr1=$6
  ip netns add "$ns0" 2>/dev/null || return 1
  ip netns add "$ns1"
  ip link add "$if0" type veth peer name "$if1"
  ip link set "$if0" netns "$ns0"
  ip link set "$if1" netns "$ns1"
  ip -n "$ns0" addr add "$addr0/24" dev "$if0"
  ip -n "$ns1" addr add "$addr1/24" dev "$if1"
  for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
  ip -n "$ns0" link set "$if0" up
  ip -n "$ns1" link set "$if1" up
}

netns_pair_down() {
  local ns
  for ns in "$@"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
