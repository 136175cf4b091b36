#!/usr/bin/env bash
# The scheduler with the Slurm executor on a real Slurm cluster of four slurmd nodes on this host
# (scripts/slurm-cluster.sh): the nodes come from sinfo, a gang becomes one batch job with an
# srun task per worker on the nodes Reel chose, a higher-priority job preempts a lower one through
# `scancel --signal=TERM` and the lower one is requeued, and a 2-node `reel train` preempted that
# way resumes from its checkpoint to the same losses as an uninterrupted run.
# Exits 77 (ctest: skipped) where a Slurm cluster cannot be started (not root, packages missing).
# Usage: scheduler_slurm_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SOURCE_DIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"

CLUSTER=$SOURCE_DIR/scripts/slurm-cluster.sh
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
  bash "$CLUSTER" stop "$WORK/slurm" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
for v in $(compgen -e | grep -E '^SLURM_' || true); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT REEL_AGENT_STORE

if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: a Slurm cluster needs root here (slurmd starts job steps as the submitting user)"
  exit 77
fi
for b in munged slurmctld slurmd srun sbatch scancel scontrol sinfo; do
  command -v "$b" > /dev/null || { echo "skipped: $b not found"; exit 77; }
done
if ! SLURM_CONF=$(SLURM_NODE_COUNT=4 bash "$CLUSTER" start "$WORK/slurm" 2> "$WORK/cluster.err"); then
  echo "skipped: the Slurm cluster did not start here:"
  sed 's/^/  /' "$WORK/cluster.err"
  exit 77
fi
export SLURM_CONF REEL_SCHEDULER_STATE=$WORK/state
cd "$WORK"

printf 'executor: {kind: slurm}\n' > cluster.yaml
"$REEL" scheduler serve --cluster cluster.yaml --port 0 --grace 20s > daemon.out 2> daemon.err &
daemon=$!
for _ in $(seq 200); do grep -q "^listening on" daemon.out 2>/dev/null && break; sleep 0.05; done
field() { "$REEL" jobs status "$1" --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"$2\"])"; }
export REEL
export -f field
check "the scheduler reads Slurm's four nodes" bash -c "[ \"\$('$REEL' nodes ls | awk 'NR > 1 {print \$1}' | tr '\n' ' ')\" = 'n1 n2 n3 n4 ' ]"

echo "1. a gang is one batch job, a task per worker, on the nodes Reel chose"
gang=$("$REEL" jobs submit --workers 2 --cpu 2 -- sh -c 'echo "$RANK/$WORLD_SIZE $REEL_NODE" > "rank$RANK"')
check "it succeeds" "$REEL" jobs wait "$gang" --timeout 60s
check "worker 0 ran on n1, worker 1 on n2" bash -c "[ \"\$(cat rank0) \$(cat rank1)\" = '0/2 n1 1/2 n2' ]"
check "as one Slurm job of two nodes and two tasks" bash -c "scontrol show job -o \$(field $gang shim_pid) | grep -q 'NumNodes=2 NumCPUs=4 NumTasks=2'"

echo "2. a 2-node reel train, preempted by a job that needs every node, resumes"
tiny_dataset
tiny_config whole "{max_steps: 40, log_every: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}" "dist: {connect_timeout_s: 60}"
tiny_config preempted "{max_steps: 40, log_every: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}" "dist: {connect_timeout_s: 60}"
check "uninterrupted training on two workers" bash -c "'$REEL' train --config '$WORK/whole.yaml' --nproc 2 --quiet > /dev/null 2>&1"
train=$("$REEL" jobs submit --name train --workers 2 --cpu 2 -- "$REEL" train --config "$WORK/preempted.yaml" --resume --quiet)
wait_for_checkpoint preempted 6
# Held still (SIGSTOP) until the scheduler has asked them to stop, the ranks cannot finish their
# 40 steps before the SIGTERM lands, however fast or slow this machine is.
ranks=$(trainers_of preempted)
kill -STOP $ranks
urgent=$("$REEL" jobs submit --name urgent --priority 10 --workers 4 --cpu 2 -- sleep 1)
for _ in $(seq 600); do [ "$(field "$train" state)" = stopping ] && break; sleep 0.1; done
kill -CONT $ranks
check "the urgent job runs" "$REEL" jobs wait "$urgent" --timeout 120s
check "the training job resumes and finishes" "$REEL" jobs wait "$train" --timeout 180s
check "it was preempted once, through Slurm" bash -c "[ \"\$(field $train preemptions)\" = 1 ] && [ \"\$(field $train attempts)\" = 2 ]"
check "rank 0 said where it stopped" grep -q "preempted (SIGTERM) after step" "state/jobs/$train/worker-0.log"
check "the resumed loss curve equals the uninterrupted one" \
  python3 "$HERE/same_steps.py" "$WORK/whole/metrics.jsonl" "$WORK/preempted/metrics.jsonl" 40 $((40 * 2 * 2 * 2))

echo "3. cancel ends the Slurm job"
long=$("$REEL" jobs submit --workers 2 --cpu 2 -- sleep 300)
for _ in $(seq 100); do [ "$(field "$long" state)" = running ] && break; sleep 0.1; done
slurm_id=$(field "$long" shim_pid)
check "cancelled" bash -c "'$REEL' jobs cancel $long > /dev/null && '$REEL' jobs wait $long --timeout 60s | grep -q cancelled"
check "and Slurm ended it" bash -c "scontrol show job -o $slurm_id | grep -Eq 'JobState=(CANCELLED|COMPLETED|FAILED)'"
finish
