#!/usr/bin/env bash
# Data-parallel `reel train` end to end with real processes on loopback:
#   - `--nproc 2` trains and reports, counting the samples of both ranks;
#   - two workers started by hand with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...)
#     log the same losses as the launcher's workers;
#   - elastic recovery: a worker killed with SIGKILL after a checkpoint makes the launcher restart
#     both from it, and the job ends with the same per-step losses and samples as an
#     uninterrupted one;
#   - preemption: SIGTERM to the launcher, or to one worker only, stops both workers at the same
#     step with a checkpoint and the job exits 75; resumed, it logs the uninterrupted losses;
#   - an elastic job resized mid-epoch (2, then 1, then 2 workers) reads each clip once per epoch;
#   - the watchdog: a worker stopped with SIGSTOP is named by the other within the timeout, and
#     the job exits 5 instead of hanging;
#   - launcher and rendezvous mistakes exit with clear messages.
# Usage: ddp_cli_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

tiny_dataset

config() {  # config NAME: a tiny run writing into $WORK/NAME
  tiny_config "$1" "{max_steps: 40, log_every: 1, eval_every_epochs: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}"
}
# steps x batch x accumulation x ranks
same_losses() { python3 "$(dirname "$0")/same_steps.py" "$1" "$2" 40 $((40 * 2 * 2 * 2)); }

config whole
check "two workers train" bash -c "'$REEL' train --config '$WORK/whole.yaml' --nproc 2 --quiet --json > '$WORK/whole.out' 2> '$WORK/whole.err'"
check "one report, from rank 0, counting both ranks' samples" python3 -c "
import json; lines = open('$WORK/whole.out').read().split('\n'); j = json.loads(lines[0])
assert len([l for l in lines if l.strip()]) == 1, lines
assert j['finished'] and j['samples'] == 320 and j['eval']['clips'] == 16, j"
check "both ranks joined over gloo" bash -c "grep -q 'rank 1 of 2 joined (gloo' '$WORK/whole.err' && grep -q 'rank 0 of 2 joined (gloo' '$WORK/whole.err'"
check "the logged loss is the mean of both ranks' losses, which differ" python3 -c "
import json
lines = [json.loads(l) for l in open('$WORK/whole/metrics.jsonl') if '\"loss\"' in l]
assert len(lines) == 40, len(lines)
for j in lines:
    r = j['rank_losses']
    assert len(r) == 2 and abs(j['loss'] - (r[0] + r[1]) / 2) < 1e-12, j
assert sum(abs(j['rank_losses'][0] - j['rank_losses'][1]) > 1e-6 for j in lines) > 30, lines[:3]"

# torchrun's variables: the first worker hosts the store.
config byhand
port=$(free_port)
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$REEL" train --config "$WORK/byhand.yaml" --quiet > "$WORK/byhand.$rank.out" 2>&1 &
  pids[$rank]=$!
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
check "workers started with torchrun's variables finish" test "$rc0$rc1" = "00"
[ "$rc0$rc1" = "00" ] || for rank in 0 1; do tail -n 15 "$WORK/byhand.$rank.out" | sed "s/^/     | rank $rank: /"; done
check "and train exactly as the launcher's" same_losses "$WORK/whole/metrics.jsonl" "$WORK/byhand/metrics.jsonl"

# Elastic recovery.
config killed
"$REEL" train --config "$WORK/killed.yaml" --nproc 2 --max-restarts 2 --quiet > "$WORK/killed.out" 2> "$WORK/killed.err" &
launcher=$!
wait_for_checkpoint killed 6
victim=$(pgrep -P "$launcher" | tail -1)
kill -9 "$victim"
wait "$launcher"
check "the job survives a worker killed with SIGKILL" test $? -eq 0
check "the launcher says which worker died and that it restarted" bash -c \
  "grep -q 'pid $victim) was killed by signal 9; restarting all 2 workers' '$WORK/killed.err' && grep -q 'finished after 1 restart' '$WORK/killed.err'"
check "the workers resumed from the checkpoint" grep -q '"event":"resume"' "$WORK/killed/metrics.jsonl"
check "losses and samples equal the uninterrupted job's" same_losses "$WORK/whole/metrics.jsonl" "$WORK/killed/metrics.jsonl"

# Preemption. Both ranks must stop at one step: rank 0 writes the checkpoint and says where.
stopped_at_latest() {  # the step the job said it stopped after is its latest checkpoint
  python3 -c "
import json, re, sys
stopped = int(re.search(r'preempted \(SIGTERM\) after step (\d+)', open(sys.argv[1]).read()).group(1))
latest = json.load(open(sys.argv[2]))['step']
assert latest == stopped and stopped < 40, (latest, stopped)" "$WORK/$1.err" "$WORK/$1/checkpoints/latest"
}
for target in launcher worker; do
  config "term_$target"
  "$REEL" train --config "$WORK/term_$target.yaml" --nproc 2 --quiet > /dev/null 2> "$WORK/term_$target.err" &
  launcher=$!
  wait_for_checkpoint "term_$target" 6
  if [ $target = launcher ]; then kill -TERM "$launcher"; else kill -TERM "$(pgrep -P "$launcher" | tail -1)"; fi
  wait "$launcher"
  check "SIGTERM to the $target: the job exits 75, preempted" test $? -eq 75
  check "both workers stopped after the checkpointed step" stopped_at_latest "term_$target"
  check "resumed after the preemption" bash -c "'$REEL' train --config '$WORK/term_$target.yaml' --nproc 2 --resume --quiet > /dev/null 2>&1"
  check "losses and samples equal the uninterrupted job's" same_losses "$WORK/whole/metrics.jsonl" "$WORK/term_$target/metrics.jsonl"
done

# The watchdog.
config stopped
"$REEL" train --config "$WORK/stopped.yaml" --nproc 2 --quiet --set dist.timeout_s=3 > "$WORK/stopped.out" 2> "$WORK/stopped.err" &
launcher=$!
wait_for_checkpoint stopped 4
stopped_at=$(date +%s)
kill -STOP "$(pgrep -P "$launcher" | tail -1)"
wait "$launcher"
rc=$?
took=$(( $(date +%s) - stopped_at ))
check "a stopped worker fails the job with exit 5 (got $rc)" test "$rc" -eq 5
check "within the watchdog's time, not a hang (took $took s)" test "$took" -le 30
check "rank 0 names rank 1 and the collective" grep -q "rank 0: collective #[0-9]* (.*) failed: .*rank 1 is not answering" "$WORK/stopped.err"

# A dataset ingested class by class (--no-shuffle) in one shard: each rank's contiguous share
# holds only some classes, which biases batch norm; the loader says so.
check "ingest in listing order" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/sorted' --no-shuffle --clip-frames 8 --short-side 32 > /dev/null 2>&1"
config sorted
"$REEL" train --config "$WORK/sorted.yaml" --nproc 2 --quiet --set data.dataset="$WORK/sorted" train.max_steps=2 \
  > /dev/null 2> "$WORK/sorted.err"
check "the loader warns about ranks that miss classes" \
  grep -q "reads [0-9] of the 8 classes of split 'train' in epoch 0: .*re-ingest with a shuffled order" "$WORK/sorted.err"

# An elastic job's world changes mid-epoch (2 workers, then 1, then 2 again, each resuming from
# the checkpoint the last wrote): every epoch still reads each clip once.
tiny_config elastic "{max_steps: 12, log_every: 1, grad_accum: 2, log_samples: true}" "{every_steps: 2, keep: 2}"
check "two workers stop after 3 steps" bash -c "'$REEL' train --config '$WORK/elastic.yaml' --nproc 2 --stop-after 3 --quiet > /dev/null 2>&1"
check "one worker resumes for 3 more" bash -c "'$REEL' train --config '$WORK/elastic.yaml' --resume --stop-after 3 --quiet > /dev/null 2> '$WORK/elastic.err'"
check "and says the epoch goes on at world size 1" grep -q "continues at world size 1 (it was 2)" "$WORK/elastic.err"
check "two workers finish" bash -c "'$REEL' train --config '$WORK/elastic.yaml' --nproc 2 --resume --quiet > /dev/null 2>&1"
check "every epoch read each clip once, across the resizes" python3 "$(dirname "$0")/each_clip_once.py" "$WORK/elastic" 2 --resized

# Mistakes.
"$REEL" train --config "$WORK/whole.yaml" --nnodes 2 > "$WORK/nodes.out" 2>&1
check "several nodes without --master-port exit 3" test $? -eq 3
check "and say so" grep -q "needs --master-port" "$WORK/nodes.out"
config lonely
port=$(free_port)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$REEL" train --config "$WORK/lonely.yaml" --quiet \
  --set dist.connect_timeout_s=2 > "$WORK/lonely.out" 2>&1
check "a worker whose rendezvous is unreachable exits 5" test $? -eq 5
check "naming the address" grep -q "cannot reach the rendezvous store at 127.0.0.1:$port" "$WORK/lonely.out"
RANK=3 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "$REEL" train --config "$WORK/lonely.yaml" > "$WORK/rank.out" 2>&1
check "a rank outside the world exits 3" test $? -eq 3
check "naming the variables" grep -q "outside a world of 2 processes (RANK/WORLD_SIZE)" "$WORK/rank.out"
finish
