#!/usr/bin/env bash
# `reel serve --replicas 1:3`: a front over worker processes. Under a load ramp it scales
# 1 -> 3 -> 1; a replica killed with SIGKILL under load is replaced and its requests fail over,
# so wrk sees no failed request; SIGTERM stops the front and every replica, exit 0.
# Usage: serve_replicas_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"

# metric NAME: the front's value of NAME now.
metric() { curl -sf "$URL/metrics" | sed -n "s/^$1 //p"; }
# wait_metric NAME VALUE: polls every 0.1 s for up to 60 s; prints the last value on a timeout.
wait_metric() {
  for _ in $(seq 600); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
  echo "$1 is $(metric "$1"), not $2"
  return 1
}

wrk_body

start_server front tiny="$CKPT" --replicas 1:3 --target-in-flight 2 --scale-period 0.3 \
  --scale-down-window 2
FRONT=$PID
export URL
check "the front listens" test -n "$URL"
check "it says how it divides the cores" grep -q "front: 1..3 replicas" "$WORK/front.out"
check "idle: one replica" wait_metric reel_front_replicas 1
check "ready through the front" curl -sf "$URL/v2/health/ready"
check "the model's metadata, proxied" bash -c "curl -sf '$URL/v2/models/tiny' | grep -q '\"name\":\"tiny\"'"

# The ramp: 12 connections against a target of 2 in flight per replica.
wrk -t2 -c12 -d300s -s "$WORK/post.lua" "$URL/v2/models/tiny/infer" > "$WORK/wrk.out" 2>&1 &
WRK=$!
PIDS+=("$WRK")
check "under load: three replicas" wait_metric reel_front_replicas 3
VICTIM=$(pgrep -P "$FRONT" | head -1)
check "the load is running" kill -0 "$WRK"
check "a replica killed with SIGKILL under load" kill -9 "$VICTIM"
check "... is replaced" wait_metric reel_front_replica_restarts_total 1
check "... and three serve again" wait_metric reel_front_replicas 3
check "the load is still running" kill -0 "$WRK"
kill -INT "$WRK"  # wrk stops and prints its figures
wait "$WRK"
cat "$WORK/wrk.out"
check "wrk: requests were answered" grep -Eq '^ +[0-9]+ requests in' "$WORK/wrk.out"
check "wrk: no failed request" bash -c "! grep -q 'Non-2xx' '$WORK/wrk.out'"
check "wrk: no socket errors" bash -c "! grep -q 'Socket errors' '$WORK/wrk.out'"
check "load gone: back to one replica" wait_metric reel_front_replicas 1
check "... and the two surplus processes exit" bash -c \
  "for _ in \$(seq 600); do [ \$(pgrep -P $FRONT | wc -l) -eq 1 ] && exit 0; sleep 0.1; done; exit 1"
check "answers after scaling down" bash -c \
  "curl -sf -H 'Content-Type: application/json' --data-binary @'$WORK/body.json' '$URL/v2/models/tiny/infer' | grep -q '\"shape\":\[1,8\]'"
LAST=$(pgrep -P "$FRONT")
kill -TERM "$FRONT"; wait "$FRONT"; check "SIGTERM: the front exits 0" test $? -eq 0
check "... and its replica has exited" bash -c "! kill -0 $LAST 2>/dev/null"
check "bad --replicas: exit 3" bash -c "'$REEL' serve '$CKPT' --replicas 0:2 --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"
finish
