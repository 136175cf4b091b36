#!/usr/bin/env bash
# Parameter-server `reel train` end to end with real processes on loopback:
#   - 2 workers with 2 servers in BSP: worker 0 logs the losses rank 0 of a 2-process
#     data-parallel job logs (the servers average the gradients and run the same optimiser), the
#     servers snapshot their shards, traffic per step is in the metrics;
#   - a server killed with SIGKILL (the workers held still meanwhile, so it dies mid-run): the
#     launcher starts it alone again, it restores its snapshot, and the job ends with the
#     uninterrupted losses; the same for a worker killed (it continues where the servers have it);
#   - SSP with staleness 2 trains to the end and no worker ran more than 2 steps ahead;
#   - one worker and one server from a plain `reel train`, with one process's losses;
#   - layouts that cannot work are refused with exit 3 and a reason.
# Usage: ps_train_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

tiny_dataset

STEPS=16
config() {  # config NAME PARALLEL
  tiny_config "$1" "{max_steps: $STEPS, log_every: 1, eval_every_epochs: 1}" \
    "{every_steps: 8, keep: 2}" "parallel: $2
dist: {timeout_s: 60}"
}
train() {  # train NAME NPROC [ARGS...]
  local name=$1 nproc=$2; shift 2
  "$REEL" train --config "$WORK/$name.yaml" --nproc "$nproc" --quiet --json "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err"
}
show_err() { tail -n 15 "$WORK/$1.err" | sed 's/^/     | /'; }
# rank0_losses DP PS: the PS job's worker-0 losses equal rank 0's of the DP job (relative 1e-4)
# at every step, with the same sample counts.
rank0_losses() {
  python3 - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
def steps(path):
    out = {}
    for line in open(path):
        m = json.loads(line)
        if "loss" in m and "step" in m and "event" not in m:
            out[m["step"]] = (m.get("rank_losses", [m["loss"]])[0], m["samples"])
    return out
a, b = steps(sys.argv[1]), steps(sys.argv[2])
n = int(sys.argv[3])
assert sorted(a) == sorted(b) == list(range(1, n + 1)), (sorted(a), sorted(b))
bad = [(s, a[s], b[s]) for s in a if abs(a[s][0] - b[s][0]) > 1e-4 * abs(a[s][0]) or a[s][1] != b[s][1]]
assert not bad, bad[:4]
PY
}
same_losses() { python3 "$(dirname "$0")/same_steps.py" --rel-tol 1e-4 "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$STEPS"; }
# metric_check NAME EXPR: EXPR (python, over m = each metrics line with ps_ keys) holds everywhere.
metric_check() {
  python3 - "$WORK/$1/metrics.jsonl" "$2" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ps = [m for m in lines if "ps_bytes_per_step" in m]
assert ps, "no parameter-server metrics"
bad = [m for m in ps if not eval(sys.argv[2])]
assert not bad, bad[:2]
PY
}
# The last step a metrics line (not an event) of $WORK/NAME has logged; nothing before the first.
last_step() { grep -v '"event"' "$WORK/$1/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' | tail -1 | cut -d: -f2; }
wait_for_step() {  # wait_for_step NAME STEP (60 s at most)
  for _ in $(seq 1 6000); do
    s=$(last_step "$1"); [ -n "$s" ] && [ "$s" -ge "$2" ] && return 0
    sleep 0.01
  done
  return 1
}
rank_pid() {  # rank_pid NAME RANK: the process of that rank in the job of $WORK/NAME.yaml
  for p in $(pgrep -f -- "^[^ ]*reel(-torch)? train --config $WORK/$1.yaml"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && echo "$p"
  done
}
# kill_mid_run NAME RANK HOLD...: once step 4 is logged, holds ranks HOLD still (SIGSTOP), kills
# RANK with SIGKILL, and lets the held ranks go on; the job then cannot have ended before.
kill_mid_run() {
  local name=$1 rank=$2; shift 2
  wait_for_step "$name" 4 || return 1
  local held=""
  for r in "$@"; do held="$held $(rank_pid "$name" "$r")"; done
  kill -STOP $held
  [ "$(last_step "$name")" -lt "$STEPS" ] || { kill -CONT $held; return 1; }
  kill -9 "$(rank_pid "$name" "$rank")"
  kill -CONT $held
}

config dp "{pipeline_stages: 1}"
check "2 data-parallel processes train" train dp 2
config ps "{parameter_servers: 2}"
check "2 workers with 2 parameter servers (bsp) train" train ps 2 || show_err ps
check "the servers announced their shards" bash -c "[ \$(grep -c 'parameter server [01] of 2 at 127.0.0.1' '$WORK/ps.err') -eq 2 ]"
check "worker 0's losses equal rank 0's of data parallel" rank0_losses dp ps
check "each server snapshotted its shard" test -s "$WORK/ps/ps/shard-0.safetensors" -a -s "$WORK/ps/ps/shard-1.safetensors"
check "the metrics carry the traffic per step and the waits" \
  metric_check ps "m['ps_bytes_per_step'] > 0 and m['ps_wait_s'] >= 0 and m['ps_max_staleness'] == 0"
check "worker 0 wrote the final checkpoint and evaluated" bash -c \
  "test -f '$WORK/ps/checkpoints/step-00000000$STEPS/model.safetensors' && grep -q '\"top1\"' '$WORK/ps.out'"

# killed_run NAME SERVERS WHAT RANK HOLD...: 2 workers and SERVERS servers, rank RANK killed
# mid-run (kill_mid_run); the job must still end well.
killed_run() {
  local name=$1 servers=$2 what=$3 rank=$4; shift 4
  config "$name" "{parameter_servers: $servers}"
  train "$name" 2 --max-restarts 2 &
  local job=$!
  check "$what killed with SIGKILL mid-run" kill_mid_run "$name" "$rank" "$@"
  wait "$job"
  check "does not end the job" test $? -eq 0 || show_err "$name"
}

killed_run ps_server_killed 2 "a server" 3 0 1
check "the launcher started it again alone" grep -q "starting rank 3 again alone" "$WORK/ps_server_killed.err"
check "it restored its snapshot" grep -q "parameter server 1 of 2 .* version [1-9]" "$WORK/ps_server_killed.err"
check "and the job ended with the uninterrupted losses" same_losses ps ps_server_killed

config ps1 "{parameter_servers: 1}"
check "2 workers with 1 server train" train ps1 2
killed_run ps1_worker_killed 1 "a worker" 1 0 2
check "its replacement continued where the servers had it" grep -q "worker 1 continues at step [1-9]" "$WORK/ps1_worker_killed.err"
check "and the job ended with the uninterrupted losses" same_losses ps1 ps1_worker_killed

config ssp "{parameter_servers: 2, sync: ssp, staleness: 2}"
check "ssp with staleness 2 trains to the end" train ssp 2
check "no worker ran more than 2 steps ahead" metric_check ssp "m['ps_max_staleness'] <= 2"
check "it reached the last step" test "$(last_step ssp)" -eq "$STEPS"

config single "{parameter_servers: 1}"
check "a plain reel train starts its worker and server" bash -c \
  "'$REEL' train --config '$WORK/single.yaml' --quiet > '$WORK/single.out' 2> '$WORK/single.err'"
check "and trains to the end" test "$(last_step single)" -eq "$STEPS"
config one "{pipeline_stages: 1}"
check "one process trains alone" bash -c \
  "'$REEL' train --config '$WORK/one.yaml' --quiet > '$WORK/one.out' 2> '$WORK/one.err'"
check "one worker with a BSP server logs one process's losses" same_losses one single

refused() {  # refused NAME PARALLEL MESSAGE
  config "$1" "$2"
  "$REEL" train --config "$WORK/$1.yaml" --nproc 2 --quiet > /dev/null 2> "$WORK/$1.err"
  [ $? -eq 3 ] && grep -q "$3" "$WORK/$1.err"
}
check "servers with pipeline stages are refused" refused bad1 "{parameter_servers: 1, pipeline_stages: 2}" "without pipeline stages"
check "ssp without servers is refused" refused bad2 "{sync: ssp}" "need parameter_servers"
check "staleness under bsp is refused" refused bad3 "{parameter_servers: 1, staleness: 2}" "staleness needs sync: ssp"
check "an unknown sync is refused" refused bad4 "{parameter_servers: 1, sync: async}" "expected bsp or ssp"
finish
