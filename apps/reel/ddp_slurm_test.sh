#!/usr/bin/env bash
# Data-parallel `reel train` under a real Slurm: a cluster of two slurmd "nodes" on this host
# (scripts/slurm-cluster.sh, everything inside the scratch folder), and one job step
# `srun -N2 -n2 --ntasks-per-node=1 reel train`, whose tasks take their rank, world size and node
# from Slurm's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_NODEID, ...) and train one model over
# loopback. Checks that the step succeeds, that rank 0 reports the job with both ranks' samples,
# that both ranks joined from Slurm's variables, and that a checkpoint was written.
# Exits 77 (ctest: skipped) where a Slurm cluster cannot be started (not root, packages missing).
# Usage: ddp_slurm_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SOURCE_DIR=$2
source "$(dirname "$0")/check_lib.sh"

CLUSTER=$SOURCE_DIR/scripts/slurm-cluster.sh
SLURM_DIR=$WORK/slurm
cleanup() {
  bash "$CLUSTER" stop "$SLURM_DIR" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

# Nothing from the caller's environment may choose the cluster or the world: a surrounding
# Slurm job's SLURM_JOB_ID would make srun run in that job, and torchrun's variables (which
# `--export=ALL` passes on) take precedence over Slurm's in reel.
for v in $(compgen -e | grep -E '^SLURM_' || true); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT \
  REEL_AGENT_STORE REEL_RESTART_GENERATION GLOO_SOCKET_IFNAME

if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: a Slurm cluster needs root here (slurmd starts job steps as the submitting user)"
  exit 77
fi
for b in munged slurmctld slurmd srun sinfo; do
  if ! command -v "$b" > /dev/null; then
    echo "skipped: $b not found (Debian packages slurmctld slurmd slurm-client munge; see scripts/setup.sh)"
    exit 77
  fi
done
if ! SLURM_CONF=$(bash "$CLUSTER" start "$SLURM_DIR" 2> "$WORK/cluster.err"); then
  echo "skipped: the Slurm cluster did not start here:"
  sed 's/^/  /' "$WORK/cluster.err"
  exit 77
fi
export SLURM_CONF
check "a two-node Slurm cluster is up" bash -c "[ \"\$(sinfo -h -N -t idle -o %N | sort -u | tr '\n' ' ')\" = 'n1 n2 ' ]"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

tiny_dataset

# The dataset, the run directory and the tasks' output files are on this host's file system,
# which both nodes share (the shared file system of a real cluster).
tiny_config job "{max_steps: 12, log_every: 1, eval_every_epochs: 0, grad_accum: 2}" "{every_steps: 6, keep: 2}" \
  "dist: {connect_timeout_s: 60}"

# The nodes are called n1 and n2, names that do not resolve: the tasks are told where rank 0's
# store is. Each task writes its own stdout and stderr (%t: the task's rank).
port=$(free_port)
start=$(date +%s)
timeout 180 srun -N2 -n2 --ntasks-per-node=1 --job-name=reel-ddp --time=5 --kill-on-bad-exit=1 \
  --chdir="$WORK" --export="ALL,MASTER_ADDR=127.0.0.1,MASTER_PORT=$port" \
  --output="$WORK/task.%t.out" --error="$WORK/task.%t.err" \
  "$REEL" train --config "$WORK/job.yaml" --iface lo --quiet --json > "$WORK/srun.out" 2> "$WORK/srun.err"
rc=$?
took=$(( $(date +%s) - start ))
check "srun -N2 -n2 reel train exits 0 (got $rc, took $took s)" test "$rc" -eq 0
if [ "$rc" -ne 0 ]; then
  for f in srun.err task.0.err task.1.err; do
    [ -s "$WORK/$f" ] && { echo "----- $f -----"; tail -n 20 "$WORK/$f"; }
  done
fi
check "rank 0 reports the job: finished, 12 steps, both ranks' samples" python3 -c "
import json; lines = [l for l in open('$WORK/task.0.out') if l.strip()]
assert len(lines) == 1, lines
j = json.loads(lines[0])
assert j['finished'] and j['steps'] == 12 and j['samples'] == 12 * 2 * 2 * 2, j  # steps x batch x accumulation x ranks"
check "rank 1 reports nothing" test ! -s "$WORK/task.1.out"
check "rank 0 joined from Slurm's variables" grep -q "rank 0 of 2 joined (gloo, slurm" "$WORK/task.0.err"
check "rank 1 joined from Slurm's variables" grep -q "rank 1 of 2 joined (gloo, slurm" "$WORK/task.1.err"
check "a checkpoint was written" test -f "$WORK/job/checkpoints/step-0000000012/model.safetensors"
finish
