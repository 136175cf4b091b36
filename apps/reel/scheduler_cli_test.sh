#!/usr/bin/env bash
# The job scheduler end to end on real processes: `reel scheduler serve` with a cluster file,
# `reel jobs` and `reel nodes` against it. Gangs start whole; a higher-priority job preempts a
# lower one, which checkpoints, is requeued and resumes (a real `reel train`, whose loss curve
# equals an uninterrupted run's); a job over its memory or its time limit is stopped and says
# why; a spot node's reclaim requeues its job; kill -9 of the scheduler loses nothing and starts
# nothing twice; bad jobs are refused with exit 3; an elastic `reel train` is shrunk and grown
# back mid-epoch and still reads each clip once per epoch.
# Usage: scheduler_cli_test.sh PATH_TO_REEL
set -u
REEL=$1
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
export REEL_SCHEDULER_STATE=$WORK/state
cd "$WORK"  # jobs run where they were submitted: their files land here
daemon=""
cleanup() { [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null; pkill -9 -f "jobs shim $WORK" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

cat > "$WORK/cluster.yaml" <<'EOF'
nodes:
  - {name: a, cpu: 2, memory: 4Gi, gpu: 2, cost_per_hour: 3}
  - {name: b, cpu: 2, memory: 4Gi, cost_per_hour: 3, cpuset: "0-1", labels: {pin: "yes"}}
  - {name: s, cpu: 2, memory: 4Gi, spot: true, cost_per_hour: 1}
queues:
  - {name: default, quota: {cpu: 6, memory: 12Gi, gpu: 2}}
  - {name: small, quota: {cpu: 1, memory: 2Gi}}
EOF
start_daemon() {
  "$REEL" scheduler serve --cluster "$WORK/cluster.yaml" --port 0 --grace 5s \
    > "$WORK/daemon.out" 2>> "$WORK/daemon.err" &
  daemon=$!
  for _ in $(seq 200); do grep -q "^listening on" "$WORK/daemon.out" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}
state() { "$REEL" jobs status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
field() { "$REEL" jobs status "$1" --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"$2\"])"; }
wait_state() {  # wait_state JOB STATE: up to 60 s
  for _ in $(seq 600); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.1; done
  echo "     | $1 is $(state "$1"), not $2" >&2; return 1
}
export REEL
export -f state field
check "the scheduler starts" start_daemon

echo "1. a gang of 2 starts whole, with torchrun's variables"
id=$("$REEL" jobs submit --workers 2 --cpu 2 -- sh -c 'echo "$RANK/$WORLD_SIZE $REEL_NODE $MASTER_ADDR" > "rank$RANK"')
check "it succeeds" "$REEL" jobs wait "$id" --timeout 60s
check "each worker knows its rank and node" bash -c "grep -q '^0/2 a 127.0.0.1$' rank0 && grep -q '^1/2 b 127.0.0.1$' rank1"
rm -f rank0 rank1

echo "2. all or nothing: a gang waits until both of its workers fit"
blocker=$("$REEL" jobs submit --cpu 2 -- sleep 300)
wait_state "$blocker" running
gang=$("$REEL" jobs submit --workers 2 --cpu 2 -- true)
# The reason is written by the scheduler's next tick: wait for it, then the gang must still wait.
for _ in $(seq 100); do [ "$(field "$gang" reason)" = "waiting for resources" ] && break; sleep 0.1; done
check "the gang waits while only one on-demand node is free" bash -c "[ \"\$(state $gang)\" = pending ]"
check "and its reason says why" bash -c "[ \"\$(field $gang reason)\" = 'waiting for resources' ]"
"$REEL" jobs cancel "$blocker" > /dev/null
check "it runs once the blocker ends" "$REEL" jobs wait "$gang" --timeout 60s

echo "2b. GPUs are handed out by index, never shared"
g1=$("$REEL" jobs submit --cpu 0.5 --gpu 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > gpu.1; sleep 300')
g2=$("$REEL" jobs submit --cpu 0.5 --gpu 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > gpu.2; sleep 300')
g3=$("$REEL" jobs submit --cpu 0.5 --gpu 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > gpu.3')
none=$("$REEL" jobs submit --cpu 0.5 -- sh -c 'echo "[$CUDA_VISIBLE_DEVICES]" > gpu.none')
wait_state "$g1" running && wait_state "$g2" running
check "two jobs got GPUs 0 and 1" bash -c "[ \"\$(cat gpu.1 gpu.2 | sort | tr '\n' ' ')\" = '0 1 ' ]"
check "a job without GPUs sees none" bash -c "'$REEL' jobs wait $none --timeout 30s > /dev/null && [ \"\$(cat gpu.none)\" = '[]' ]"
check "a third waits while both are held" bash -c "[ \"\$(state $g3)\" = pending ]"
"$REEL" jobs cancel "$g1" > /dev/null
check "and gets the GPU the first gave back" bash -c "'$REEL' jobs wait $g3 --timeout 30s > /dev/null && [ \"\$(cat gpu.3)\" = \"\$(cat gpu.1)\" ]"
"$REEL" jobs cancel "$g2" > /dev/null
"$REEL" jobs wait "$g2" --timeout 30s > /dev/null

echo "2c. on a node with a cpuset, whole CPUs get cores of their own and a fraction shares the rest"
cpus_to() { echo "grep Cpus_allowed_list: /proc/self/status | cut -f2 > $1"; }
c1=$("$REEL" jobs submit --cpu 1 --selector pin=yes -- sh -c "$(cpus_to cpus.1); while [ ! -e cpus.go ]; do sleep 0.05; done")
wait_state "$c1" running
c2=$("$REEL" jobs submit --cpu 0.5 --selector pin=yes -- sh -c "$(cpus_to cpus.2)")
"$REEL" jobs wait "$c2" --timeout 30s > /dev/null
touch cpus.go
"$REEL" jobs wait "$c1" --timeout 30s > /dev/null
c3=$("$REEL" jobs submit --cpu 2 --selector pin=yes -- sh -c "$(cpus_to cpus.3)")
"$REEL" jobs wait "$c3" --timeout 30s > /dev/null
check "one CPU: core 0 alone" test "$(cat cpus.1)" = 0
check "half a CPU: the core no one holds" test "$(cat cpus.2)" = 1
check "two CPUs: both cores" test "$(cat cpus.3)" = 0-1

echo "3. a bad job is refused"
"$REEL" jobs submit --queue nope -- true > "$WORK/bad.out" 2>&1
check "an unknown queue exits 3" test $? -eq 3
check "naming the queues" grep -q "no queue 'nope' (queues: default, small)" "$WORK/bad.out"
"$REEL" jobs submit --cpu 3 -- true > "$WORK/bad.out" 2>&1
check "a worker larger than any node exits 3" test $? -eq 3
check "saying so" grep -q "do not fit on the cluster's nodes even when idle" "$WORK/bad.out"
"$REEL" jobs submit --memory 4GB -- true > "$WORK/bad.out" 2>&1
check "a malformed memory exits 3" test $? -eq 3
"$REEL" jobs submit --queue small --cpu 2 -- true > "$WORK/bad.out" 2>&1
check "more than a queue may ever use exits 3" grep -q "needs more than queue small may ever use" "$WORK/bad.out"

printf 'nodes:\n  - {name: x, cpu: 2}\n' > bad-cluster.yaml
"$REEL" scheduler serve --state "$WORK/other" --cluster bad-cluster.yaml --port 0 > bad.out 2>&1
check "a cluster file without a node's memory exits 3" test $? -eq 3
check "naming file, line and the node" grep -q "bad-cluster.yaml:2:5: key 'nodes\[0\]': a node needs cpu and memory" bad.out
printf 'nodes:\n  - {name: x, cpu: 2, memory: 1Gi}\nqueues:\n  - {name: q, quota: {cpu: 1, gpus: 1}}\n' > bad-cluster.yaml
"$REEL" scheduler serve --state "$WORK/other" --cluster bad-cluster.yaml --port 0 > bad.out 2>&1
check "a typo in a quota exits 3" bash -c "[ $? -eq 3 ] && grep -q \"unknown key 'queues\[0\].quota.gpus'\" bad.out"
printf 'nodes:\n  - {name: x, cpu: 2, memory: 1Gi, cpuset: "0,4000"}\n' > bad-cluster.yaml
"$REEL" scheduler serve --state "$WORK/other" --cluster bad-cluster.yaml --port 0 > bad.out 2>&1
check "a cpuset naming a core this machine lacks exits 3" bash -c "[ $? -eq 3 ] && grep -q 'cpuset 0,4000 names core 4000, which this machine does not let Reel use' bad.out"

echo "4. a job over its memory is stopped and says so"
mem=$("$REEL" jobs submit --memory 64Mi -- python3 -c 'import time; x = bytearray(400 << 20); time.sleep(30)')
check "it fails" bash -c "! '$REEL' jobs wait $mem --timeout 60s > /dev/null"
# Held to it by a cgroup of its own where this machine allows one, else by polling its memory.
check "over its memory" bash -c "'$REEL' jobs status $mem --json | grep -Eq 'over its memory: .* (resident|at its peak), 64Mi requested'"
grep -o '"memory_enforcement":"[^"]*"' "$WORK/state/jobs/$mem/exit.json" | sed 's/^/     | /'


echo "5. a time limit ends a job"
slow=$("$REEL" jobs submit --time-limit 1s -- sleep 60)
check "it fails" bash -c "! '$REEL' jobs wait $slow --timeout 60s > /dev/null"
check "at its time limit" bash -c "[ \"\$(field $slow reason)\" = 'time limit 1s' ]"

echo "5b. an ended job's processes and scratch space go; its log stays"
tidy=$("$REEL" jobs submit --ttl 0s -- sh -c 'echo kept > "$REEL_SCRATCH/f"; sleep 300 & echo $! > bg.pid; echo done')
check "it succeeds" "$REEL" jobs wait "$tidy" --timeout 30s
check "what it left running was stopped" bash -c "for _ in \$(seq 100); do kill -0 \$(cat bg.pid) 2>/dev/null || exit 0; grep -q '^State:.Z' /proc/\$(cat bg.pid)/status 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
check "its scratch folder is removed" bash -c "for _ in \$(seq 100); do [ -d '$WORK/state/jobs/$tidy/scratch' ] || exit 0; sleep 0.1; done; exit 1"
check "its log is kept" grep -q done "$WORK/state/jobs/$tidy/worker-0.log"

echo "6. cancel"
long=$("$REEL" jobs submit --cpu 2 --workers 2 -- sleep 60)
wait_state "$long" running
queued=$("$REEL" jobs submit --cpu 2 -- sleep 60)
check "a pending job is cancelled" bash -c "'$REEL' jobs cancel $queued | grep -q 'cancelled'"
check "a running job is stopped" bash -c "'$REEL' jobs cancel $long > /dev/null && '$REEL' jobs wait $long --timeout 30s | grep -q 'cancelled'"

echo "7. a spot node's reclaim requeues its job elsewhere"
spot=$("$REEL" jobs submit --spot --cpu 2 -- sh -c 'trap "exit 75" TERM; echo "on $REEL_NODE" >> spot.log; [ -f spot.ran ] && exit 0; touch spot.ran; sleep 60 & wait')
wait_state "$spot" running
check "a spot job goes to the spot node first" bash -c "[ \"\$(\"$REEL\" jobs status $spot --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"nodes\"][0])')\" = s ]"
check "reclaiming the node preempts it" bash -c "'$REEL' nodes reclaim s | grep -q 'preempted: \[\"$spot\"\]'"
check "it finishes on another node" "$REEL" jobs wait "$spot" --timeout 60s
check "it ran on s, then on a ($(tr '\n' ' ' < spot.log))" bash -c "[ \"\$(cat spot.log | tr '\n' ' ')\" = 'on s on a ' ]"
check "its preemption is counted" bash -c "[ \"\$(field $spot preemptions)\" = 1 ]"
check "its cost counts both runs" python3 -c "
import json, subprocess, sys
j = json.loads(subprocess.check_output([sys.argv[1], 'jobs', 'status', sys.argv[2], '--json']))
assert j['cost'] > 0, j" "$REEL" "$spot"
check "the node can be restored" bash -c "'$REEL' nodes restore s > /dev/null && '$REEL' nodes ls | grep -Eq '^s .* ready$'"

echo "8. kill -9 of the scheduler: its jobs run on and are found again"
survivor=$("$REEL" jobs submit -- sh -c 'echo started >> survivor.log; sleep 2; echo done >> survivor.log')
wait_state "$survivor" running
kill -9 "$daemon"
wait "$daemon" 2>/dev/null
for _ in $(seq 300); do grep -q done survivor.log 2>/dev/null && break; sleep 0.1; done
check "the job ran to its end without the scheduler" grep -q done survivor.log
check "a new scheduler starts" start_daemon
check "it finds the job succeeded" "$REEL" jobs wait "$survivor" --timeout 30s
check "and started it once ($(grep -c started survivor.log) starts, $(field $survivor attempts) attempts)" bash -c "[ \$(grep -c started survivor.log) = 1 ] && [ \"\$(field $survivor attempts)\" = 1 ]"

echo "9. a pipeline whose tasks are the scheduler's jobs"
cat > p.yaml <<'EOF'
name: onsched
tasks:
  - name: make
    command: [sh, -c, 'echo "from $REEL_JOB_ID on $REEL_NODE" > "$1"', sh, "{{outputs.msg}}"]
    resources: {cpu: 2}
  - name: read
    command: [sh, -c, 'cat "$1"; exit 4', sh, "{{tasks.make.outputs.msg}}"]
EOF
"$REEL" pipeline --state "$WORK/pipelines" run p.yaml --scheduler auto > pipe.out 2> pipe.err
check "the pipeline runs on the scheduler and fails where its task fails" test $? -eq 1
check "its tasks were the scheduler's jobs" bash -c "'$REEL' jobs ls | grep -Eq ' make +succeeded' && '$REEL' jobs ls | grep -Eq ' read +failed .*exit 4'"
check "an output passed from one job to the next" bash -c "grep -q 'from job-[0-9]* on [ab]' '$WORK/pipelines/logs/onsched-1/read.log'"
check "the failure names the task" grep -q "task 'read' exit 4" pipe.err

echo "9b. a job that ends its work as it is preempted succeeded, and is not run again"
done_job=$("$REEL" jobs submit --name finisher --cpu 2 --workers 2 -- sh -c 'trap "exit 0" TERM; sleep 100 & wait')
wait_state "$done_job" running
vip=$("$REEL" jobs submit --name vip --cpu 2 --workers 2 --priority 10 -- true)
check "the preemptor runs" "$REEL" jobs wait "$vip" --timeout 60s
check "the preempted job succeeded once" bash -c "[ \"\$(state $done_job)\" = succeeded ] && [ \"\$(field $done_job attempts)\" = 1 ] && [ \"\$(field $done_job preemptions)\" = 0 ]"

echo "10. preemption of a real training job: checkpoint, requeue, resume, the same losses"
tiny_dataset
tiny_config whole "{max_steps: 40, log_every: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}"
tiny_config preempted "{max_steps: 40, log_every: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}"
check "uninterrupted training" bash -c "'$REEL' train --config '$WORK/whole.yaml' --quiet > /dev/null 2>&1"
train=$("$REEL" jobs submit --name train --cpu 2 -- "$REEL" train --config "$WORK/preempted.yaml" --resume --quiet)
wait_for_checkpoint preempted 6
# Held still (SIGSTOP) until the scheduler has asked it to stop, the trainer cannot finish its
# 40 steps before the SIGTERM lands, however fast or slow this machine is.
trainer=$(trainers_of preempted)
kill -STOP $trainer
urgent=$("$REEL" jobs submit --name urgent --cpu 2 --workers 2 --priority 10 -- sleep 1)
wait_state "$train" stopping
kill -CONT $trainer
check "the urgent job runs" "$REEL" jobs wait "$urgent" --timeout 60s
check "the training job resumes and finishes" "$REEL" jobs wait "$train" --timeout 120s
check "it was preempted once" bash -c "[ \"\$(field $train preemptions)\" = 1 ] && [ \"\$(field $train attempts)\" = 2 ]"
log=$WORK/state/jobs/$train/worker-0.log
check "its first run said so" grep -q "preempted (SIGTERM) after step" "$log"
grep -q "preempted (SIGTERM)" "$log" || tail -5 "$log" | sed 's/^/     | /'
check "the resumed loss curve equals the uninterrupted one" \
  python3 "$HERE/same_steps.py" "$WORK/whole/metrics.jsonl" "$WORK/preempted/metrics.jsonl" 40
echo "11. an elastic training job shrinks for an urgent job and grows back; each clip once per epoch"
tiny_config elastic "{max_steps: 40, log_every: 1, log_samples: true}" "{every_steps: 2, keep: 2}" "dist: {connect_timeout_s: 60}"
# Each worker of the elastic job: its first two-worker run and its one-worker run train 4 steps,
# each then waiting to be resized as if still training, so the resizes land at known steps
# mid-epoch (with one clip per batch the 32 clips are 16 steps on two workers) and what is left
# splits evenly; the last run trains to the end.
cat > elastic.sh <<'EOF'
if [ "$WORLD_SIZE" = 2 ] && [ -e grown ]; then exec "$@"; fi
"$@" --stop-after 4 || exit
trap 'exit 75' TERM
touch "waiting.$WORLD_SIZE.$RANK"
while :; do sleep 0.05; done
EOF
wait_file() { for _ in $(seq 1200); do [ -e "$1" ] && return 0; sleep 0.05; done; echo "     | no $1" >&2; return 1; }
workers_of() { "$REEL" jobs status "$1" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))'; }
elastic=$("$REEL" jobs submit --name elastic --cpu 2 --workers 1:2 -- sh elastic.sh "$REEL" train \
  --config "$WORK/elastic.yaml" --resume --quiet --set data.batch_size=1)
wait_file waiting.2.0 && wait_file waiting.2.1
blocker=$("$REEL" jobs submit --name urgent1 --cpu 2 --priority 10 -- sh -c 'while [ ! -e go ]; do sleep 0.05; done')
wait_state "$blocker" running
wait_file waiting.1.0
check "it shrinks to one worker to make room" test "$(workers_of "$elastic")" = 1
touch grown go
check "the urgent job ends" "$REEL" jobs wait "$blocker" --timeout 60s
check "it grows back to two and finishes" "$REEL" jobs wait "$elastic" --timeout 120s
check "in three runs, none of them counted as preempted" \
  test "$(field "$elastic" attempts) $(field "$elastic" preemptions)" = "3 0"
check "the loader went on with each epoch at the new world sizes" bash -c "
  grep -q 'continues at world size 1 (it was 2)' '$WORK/state/jobs/$elastic/worker-0.log' &&
  grep -q 'continues at world size 2 (it was 1)' '$WORK/state/jobs/$elastic/worker-0.log'"
check "every epoch read each clip once, across both resizes" python3 "$HERE/each_clip_once.py" "$WORK/elastic" 1 --resized
check "ls lists every job" bash -c "[ \$('$REEL' jobs ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') = 25 ]"
finish
