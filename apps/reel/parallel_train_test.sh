#!/usr/bin/env bash
# Pipeline and hybrid `reel train` end to end with real processes on loopback:
#   - one pipeline of 2 stages (--nproc 2, parallel.pipeline_stages 2, 2 micro-batches of 2)
#     logs the losses of one process accumulating the same 2 micro-batches, evaluates as it does
#     (rank 1 holds only its stage's weights; rank 0 gathers them to evaluate),
#     and registers its sharded checkpoint as one registry version;
#   - 2 replicas x 2 stages (--nproc 4) log the losses of 2 data-parallel processes on the same
#     data; their checkpoints are sharded (a manifest, a shard per stage, no whole model file);
#   - a stage killed with SIGKILL: the launcher restarts the job from its sharded checkpoint and it
#     ends with the uninterrupted losses;
#   - the checkpoint of a 2 x 2 job resumes as 2 data-parallel processes (the same losses), and as
#     1 x 2 then 1 process (another layout, the same run: its steps and samples go on);
#   - parallel: auto keeps a small model data parallel, cuts it into a pipeline when a replica
#     does not fit a worker's memory, and refuses (exit 3) when nothing fits, saying why;
#   - layouts that cannot work are refused with exit 3 and a reason.
# Usage: parallel_train_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

tiny_dataset

# config NAME BATCH ACCUM PARALLEL: a tiny run of 12 steps with BATCH clips per replica and
# step micro-batch, ACCUM micro-batches per step, the `parallel` section PARALLEL.
config() {
  tiny_config "$1" "{max_steps: 12, log_every: 1, eval_every_epochs: 1, grad_accum: $3}" \
    "{every_steps: 4, keep: 2}" "parallel: $4
registry: {uri: $WORK/registry, model: $1}"
  sed -i "s/batch_size: 2/batch_size: $2/" "$WORK/$1.yaml"
}
train() {  # train NAME NPROC [ARGS...]
  local name=$1 nproc=$2; shift 2
  "$REEL" train --config "$WORK/$name.yaml" --nproc "$nproc" --quiet --json "$@" \
    > "$WORK/$name.out" 2> "$WORK/$name.err"
}
# close_losses A B: both runs logged steps 1..12 with losses within 1e-4 (relative) and the
# same sample counts; float sums in another order are the only difference allowed.
close_losses() {
  python3 "$(dirname "$0")/same_steps.py" --rel-tol 1e-4 "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 12
}
same_eval() {  # the final evaluations agree
  python3 -c "
import json
a, b = (json.loads(open('$WORK/' + n + '.out').readline())['eval'] for n in ('$1', '$2'))
assert a['clips'] == b['clips'] and abs(a['top1'] - b['top1']) < 1e-9, (a, b)"
}

config one 2 2 "{pipeline_stages: 1}"
check "one process accumulating 2 micro-batches trains" train one 1
config pipe 4 1 "{pipeline_stages: 2, micro_batches: 2, schedule: 1f1b}"
check "a pipeline of 2 stages trains" train pipe 2
[ -s "$WORK/pipe.err" ] && grep -q "rror" "$WORK/pipe.err" && tail -n 20 "$WORK/pipe.err" | sed 's/^/     | /'
check "rank 0 planned the cut from measured unit costs" grep -q "pipeline stage 1: units .* ms per micro-batch" "$WORK/pipe.err"
check "rank 1 dropped the other stage's weights" python3 - "$WORK/pipe.err" <<'PY'
import re, sys
# Exact bytes: where the measured costs put the cut, stage 1 may hold all but a few kB of a model
# this small, which the MB figures round away.
m = re.search(r"rank 1: stage 1 keeps .* \(([0-9]+) of ([0-9]+) bytes\)", open(sys.argv[1]).read())
assert m and 0 < int(m.group(1)) < int(m.group(2)), m
PY
check "and both stages trained as one process does" close_losses one pipe
check "its evaluations equal one process's" same_eval one pipe
check "its checkpoints are sharded: a manifest, 2 shards, no whole model" bash -c "
  d='$WORK/pipe/checkpoints/step-0000000012'
  test -f \"\$d/manifest.json\" && test -f \"\$d/shard-00000-of-00002.model.safetensors\" &&
  test -f \"\$d/shard-00001-of-00002.state.safetensors\" && ! test -e \"\$d/model.safetensors\""
check "the sharded checkpoint was registered as one version" bash -c \
  "'$REEL' models show models:/pipe/1 --registry '$WORK/registry' > '$WORK/pipe.show' 2>&1"
check "with every stage's tensors" bash -c "'$REEL' models export models:/pipe/1 '$WORK/pipe.export' --registry '$WORK/registry' > /dev/null 2>&1 &&
  python3 -c \"
import json, struct, sys
f = open('$WORK/pipe.export/model.safetensors', 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n))
names = [k for k in h if k != '__metadata__']
assert any(k.startswith('stem.') for k in names) and any(k.startswith('fc.') for k in names), names
assert any(k.startswith('layer4.') for k in names), names\""

config dp 2 2 "{pipeline_stages: 1}"
check "2 data-parallel processes train" train dp 2
config hybrid 4 1 "{pipeline_stages: 2, micro_batches: 2, schedule: gpipe}"
check "2 replicas x 2 stages train" train hybrid 4
check "and log the losses of 2 data-parallel processes" close_losses dp hybrid
check "the loss is each replica's last stage's" python3 -c "
import json
lines = [json.loads(l) for l in open('$WORK/hybrid/metrics.jsonl') if '\"loss\"' in l]
assert all(len(j['rank_losses']) == 2 and abs(j['loss'] - sum(j['rank_losses']) / 2) < 1e-12 for j in lines), lines[0]"

# A stage dies: the job restarts from its sharded checkpoint.
config killed 4 1 "{pipeline_stages: 2, micro_batches: 2, schedule: gpipe}"
"$REEL" train --config "$WORK/killed.yaml" --nproc 4 --max-restarts 1 --quiet > "$WORK/killed.out" 2> "$WORK/killed.err" &
launcher=$!
wait_for_checkpoint killed 4
kill -9 "$(pgrep -P "$launcher" | tail -1)"
wait "$launcher"
check "a 2 x 2 job survives a stage killed with SIGKILL" test $? -eq 0
check "it resumed from its sharded checkpoint" grep -q '"event":"resume"' "$WORK/killed/metrics.jsonl"
check "and ended with the uninterrupted losses" close_losses hybrid killed

# Other layouts resume a 2 x 2 checkpoint.
config relayout 4 1 "{pipeline_stages: 2, micro_batches: 2, schedule: gpipe}"
check "a 2 x 2 job stops after 4 steps" train relayout 4 --stop-after 4
sed -i "s/batch_size: 4/batch_size: 2/; s/grad_accum: 1/grad_accum: 2/; s/pipeline_stages: 2/pipeline_stages: 1/" "$WORK/relayout.yaml"
check "2 data-parallel processes resume it" train relayout 2 --resume
check "with the losses of the 2 x 2 job" close_losses hybrid relayout

config reshaped 4 1 "{pipeline_stages: 2, micro_batches: 2}"
check "a 2 x 2 job stops after 4 steps" train reshaped 4 --stop-after 4
check "1 x 2 resumes it for 4 more" train reshaped 2 --resume --stop-after 4
sed -i "s/pipeline_stages: 2/pipeline_stages: 1/" "$WORK/reshaped.yaml"
check "1 process finishes it" train reshaped 1 --resume
check "each resumed where the last stopped, and the run saw 12 steps of 8, then 4 clips" python3 -c "
import json
events = [json.loads(l) for l in open('$WORK/reshaped/metrics.jsonl') if '\"resume\"' in l]
assert [e['step'] for e in events] == [4, 8], events
out = json.loads(open('$WORK/reshaped.out').readline())
assert out['finished'] and out['steps'] == 12 and out['samples'] == 4 * 8 + 4 * 4 + 4 * 4, out"

# parallel: auto (the default) plans from measured costs, the workers' memory and the link.
config auto 4 1 "{pipeline_stages: auto, micro_batches: 2}"
check "auto on 2 processes trains" train auto 2
check "and keeps a model this small data parallel, saying why" \
  grep -q "parallel: auto chose data parallel: a replica needs" "$WORK/auto.err"
# A worker's memory between what a 2-stage pipeline's largest stage and a whole replica need
# (the estimates depend on shapes only, not on timings).
memory=$(python3 -c "
import re
text = open('$WORK/auto.err').read()
need = {m.group(1): int(m.group(2)) for m in re.finditer(r'auto: (\d x \d) \(.*?\) needs (\d+) bytes', text)}
print((need['2 x 1'] + need['1 x 2']) / 2 / 2**20)")
config small 4 1 "{pipeline_stages: auto, micro_batches: 2, worker_memory_mb: $memory}"
check "auto with workers too small for a replica trains" train small 2
check "as a pipeline of 2 stages, saying why" \
  grep -q "parallel: auto chose 1 x 2 (pipeline): a replica needs .*, more than the .* a worker has; cut into 2 stages" "$WORK/small.err"
check "and learns as the fixed pipeline does" close_losses pipe small
config tiny 4 1 "{worker_memory_mb: 0.001}"
train tiny 2
check "auto with workers too small for any layout exits 3" test $? -eq 3
check "naming what a stage would need" grep -q "no layout of 2 processes fits 1.0 KiB per worker" "$WORK/tiny.err"

# Layouts that cannot work.
config odd 4 1 "{pipeline_stages: 2}"
train odd 3
check "3 processes for 2 stages exit 3" test $? -eq 3
check "and say why" grep -q "needs a multiple of 2 processes" "$WORK/odd.err"
config deep 4 1 "{pipeline_stages: 8}"
train deep 8
check "more stages than the model has units exit 3" test $? -eq 3
check "naming the units" grep -q "has 6 units" "$WORK/deep.err"
config frames 4 1 "{pipeline_stages: 2}"
sed -i "s/name: r2plus1d, num_classes: 8, width: 4, layers: \[1, 1, 1, 1\]/name: single_frame, num_classes: 8/" "$WORK/frames.yaml"
train frames 2
check "a model that does not split into units exits 3" test $? -eq 3
config many 4 1 "{pipeline_stages: 2, micro_batches: 5}"
train many 2
check "more micro-batches than clips in a batch exit 3" test $? -eq 3
finish
