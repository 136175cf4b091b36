#!/usr/bin/env bash
# Two nodes in two network namespaces joined by a veth pair (made here, removed on exit): one
# `reel train --nnodes 2` launcher per namespace trains one model over TCP between them, each
# naming its interface. Then node 1 names the wrong interface (its loopback), and the
# connectivity check turns that into an error naming the unreachable rank and address.
# Needs root (CAP_NET_ADMIN); exits 77 (ctest: skipped) where namespaces cannot be made.
# Usage: ddp_netns_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

source "$(dirname "$0")/../../scripts/netns_pair.sh"
NS0=reel-n0-$$
NS1=reel-n1-$$
cleanup() {
  netns_pair_down "$NS0" "$NS1"
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! netns_pair_up "$NS0" "$NS1" "veth0-$$" "veth1-$$" 10.231.0.1 10.231.0.2; then
  echo "skipped: cannot create network namespaces here (needs root and ip(8) from iproute2)"
  exit 77
fi

tiny_dataset
# The dataset and checkpoints are on this host's file system, which both namespaces share (the
# shared file system of a real cluster).
tiny_config two "{max_steps: 12, log_every: 1, eval_every_epochs: 0}" "{every_steps: 6, keep: 2}" \
  "dist: {connect_timeout_s: 60}"
node() {  # node NAMESPACE RANK INTERFACE CONFIG OUT
  ip netns exec "$1" "$REEL" train --config "$4" --nnodes 2 --node-rank "$2" --nproc 1 \
    --master-addr 10.231.0.1 --master-port 29531 --iface "$3" --quiet --json > "$5.out" 2> "$5.err"
}
node "$NS0" 0 "veth0-$$" "$WORK/two.yaml" "$WORK/node0" &
n0=$!
node "$NS1" 1 "veth1-$$" "$WORK/two.yaml" "$WORK/node1" &
n1=$!
wait $n0; rc0=$?
wait $n1; rc1=$?
check "both nodes finish (exit $rc0 and $rc1)" test "$rc0$rc1" = "00"
check "rank 1 joined from the other namespace's address" grep -q "rank 1 of 2 joined (gloo, reel launcher at 10.231.0.2:" "$WORK/node1.err"
check "node 0 reports the job: 12 steps, both nodes' samples" python3 -c "
import json; j = json.load(open('$WORK/node0.out'))
assert j['finished'] and j['steps'] == 12 and j['samples'] == 12 * 2 * 2, j"
check "checkpoints were written once, by rank 0" test -f "$WORK/two/checkpoints/step-0000000012/model.safetensors"

# Node 1 names its loopback: rank 0 cannot reach it there.
sed -e "s#run_dir: $WORK/two#run_dir: $WORK/wrong#" -e 's/connect_timeout_s: 60/connect_timeout_s: 8/' \
  "$WORK/two.yaml" > "$WORK/wrong.yaml"
node "$NS0" 0 "veth0-$$" "$WORK/wrong.yaml" "$WORK/wrong0" &
n0=$!
node "$NS1" 1 lo "$WORK/wrong.yaml" "$WORK/wrong1" &
n1=$!
wait $n0; rc0=$?
wait $n1; rc1=$?
check "a wrong interface fails the job (exit $rc0 and $rc1)" test "$rc0" -ne 0 -a "$rc1" -ne 0
check "naming the rank and the address it cannot reach" \
  grep -q "rank 0 (10.231.0.1) cannot reach rank 1 at 127.0.0.1:[0-9]*: Connection refused" "$WORK/wrong0.err"
finish
