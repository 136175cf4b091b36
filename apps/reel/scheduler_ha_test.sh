#!/usr/bin/env bash
# Two scheduler daemons sharing one PostgreSQL database (the server of ctest's "postgres"
# fixture) and one state folder: one leads, the other stands by and names it. kill -9 of the
# leader hands everything to the other within 10 s: jobs that ended meanwhile are collected,
# running ones adopted, pending ones started, and no job is lost or started twice. A clean stop
# gives the lease up at once.
# Usage: scheduler_ha_test.sh PATH_TO_REEL POSTGRES_DIR
set -u
REEL=$1
PG=$2
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
db="reel_sched_$$"
admin="host=$PG/run port=5432 user=reel dbname=reel"
psql -q "$admin" -c "CREATE DATABASE $db" || exit 1
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  pkill -9 -f "jobs shim $WORK" 2>/dev/null
  psql -q "$admin" -c "DROP DATABASE $db WITH (FORCE)"
  rm -rf "$WORK"
}
trap cleanup EXIT
export REEL_SCHEDULER_DATABASE="postgresql:///$db?host=$PG/run&port=5432&user=reel"
cd "$WORK"
mkdir starts
cat > cluster.yaml <<'EOF'
nodes:
  - {name: n1, cpu: 2, memory: 2Gi}
EOF

# start NAME: a daemon with that identity; $NAME_url and $NAME_pid are set once it answers.
start() {
  "$REEL" scheduler serve --state "$WORK/state" --cluster cluster.yaml --port 0 --identity "$1" \
    --lease 3s --grace 5s > "$1.out" 2> "$1.err" &
  pids+=($!)
  eval "${1}_pid=$!"
  for _ in $(seq 200); do [ "$(wc -l < "$1.out")" -ge 3 ] && break; sleep 0.05; done
  eval "${1}_url=$(sed -n 's/^listening on //p' "$1.out")"
}
role() { curl -sf "$1/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["role"])'; }
started() { ls starts | wc -l; }
# Each job counts its starts, then waits for the file "go".
submit() {
  "$REEL" jobs submit --scheduler "$b_url,$a_url" --cpu 1 --name "$1" -- \
    sh -c 'echo $$ >> "starts/$REEL_JOB_ID"; while [ ! -e go ]; do sleep 0.05; done'
}

echo "1. one leads, the other stands by"
start a
check "a leads" grep -qx leading a.out
start b
check "b stands by" grep -qx "standing by" b.out
check "their health says so" bash -c "[ '$(role "$a_url")' = leader ] && [ '$(role "$b_url")' = standby ]"
"$REEL" jobs ls --scheduler "$b_url" > /dev/null 2> standby.err; code=$?
check "the standby refuses the API (exit 5) naming the leader" \
  bash -c "[ $code -eq 5 ] && grep -q 'standing by; the leader is at $a_url' standby.err"

echo "2. jobs through the list of both: the leader takes them"
ids=()
for n in 1 2 3 4; do ids+=("$(submit "j$n")"); done
check "four jobs" test "${#ids[@]}" -eq 4
for _ in $(seq 200); do [ "$(started)" -ge 2 ] && break; sleep 0.05; done
check "two run (the node has 2 CPUs), two wait" bash -c "[ $(started) -eq 2 ]"

echo "3. kill -9 of the leader while its jobs end"
kill -9 "$a_pid"
t0=$(date +%s.%N)
wait "$a_pid" 2>/dev/null
touch go  # the two running jobs end while no daemon leads
for _ in $(seq 300); do [ "$(role "$b_url")" = leader ] && break; sleep 0.05; done
t1=$(date +%s.%N)
took=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
echo "     | b leads ${took} s after a's kill -9"
check "b leads within 10 s" python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 10 else 1)"
for id in "${ids[@]}"; do
  check "$id succeeds" "$REEL" jobs wait "$id" --scheduler "$a_url,$b_url" --timeout 60s
done
check "each job started exactly once" bash -c \
  "[ \$(ls starts | wc -l) -eq 4 ] && for f in starts/*; do [ \$(wc -l < \$f) -eq 1 ] || exit 1; done"
check "and none is lost" bash -c "[ \$('$REEL' jobs ls --scheduler '$b_url' --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') -eq 4 ]"

echo "4. a restarted daemon stands by; a clean stop of the leader hands over at once"
start a
check "a stands by" grep -qx "standing by" a.out
check "the state folder names the leader" bash -c "[ \"\$(cat state/scheduler.url)\" = '$b_url' ]"
kill -TERM "$b_pid"
wait "$b_pid"
for _ in $(seq 60); do [ "$(role "$a_url")" = leader ] && break; sleep 0.05; done
check "a leads within 3 s of b's stop" bash -c "[ '$(role "$a_url")' = leader ]"
id=$(submit j5)
check "and runs new jobs" "$REEL" jobs wait "$id" --scheduler "$a_url" --timeout 60s
check "which start once" bash -c "[ \$(wc -l < starts/$id) -eq 1 ]"
finish
