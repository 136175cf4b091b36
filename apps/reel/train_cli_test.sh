#!/usr/bin/env bash
# `reel train` and `reel eval` end to end: a run killed with SIGKILL after a checkpoint and
# resumed must log the same per-step losses as an uninterrupted run; eval of the last checkpoint
# matches the run's final report; a finished run registers its model, and a fine-tune from it
# (model.init) records it as the parent; bad configs and reruns fail with clear messages and exit
# codes.
# Usage: train_cli_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

tiny_dataset

config() {  # config NAME: a tiny run writing into $WORK/NAME
  tiny_config "$1" "{max_steps: 40, log_every: 1, eval_every_epochs: 1, grad_accum: 2}" "{every_steps: 2, keep: 2}"
}
config whole
config killed
check "uninterrupted training" bash -c "'$REEL' train --config '$WORK/whole.yaml' --quiet > '$WORK/whole.out' 2>&1"
check "it reports validation accuracy" grep -q "^validation (test): clips 16  top-1" "$WORK/whole.out"

# The same run, killed with SIGKILL once a checkpoint past step 6 exists, then resumed.
"$REEL" train --config "$WORK/killed.yaml" --quiet > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
  step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$WORK/killed/checkpoints/latest" 2>/dev/null)
  [ -n "$step" ] && [ "$step" -ge 6 ] && break
  sleep 0.01
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "the killed run stopped before its end" bash -c "! grep -q final_eval '$WORK/killed/metrics.jsonl'"
check "resumed training" bash -c "'$REEL' train --config '$WORK/killed.yaml' --resume --quiet > '$WORK/resumed.out' 2>&1"
check "it says where it resumed" grep -q "resumed from step" "$WORK/resumed.out"

check "the resumed loss curve equals the uninterrupted one" \
  python3 "$(dirname "$0")/same_steps.py" "$WORK/whole/metrics.jsonl" "$WORK/killed/metrics.jsonl" 40
check "and so does the final evaluation" python3 -c "
import json, sys
final = lambda p: [json.loads(l) for l in open(p) if '\"final_eval\"' in l][-1]
assert final(sys.argv[1])['top1'] == final(sys.argv[2])['top1']" "$WORK/whole/metrics.jsonl" "$WORK/killed/metrics.jsonl"

# SIGTERM is a preemption: the run stops after the step it is in, writes a checkpoint there,
# exits 75, and resumes from exactly that step with the same loss curve.
config termed
"$REEL" train --config "$WORK/termed.yaml" --quiet > /dev/null 2> "$WORK/termed.err" &
pid=$!
for _ in $(seq 1 3000); do
  step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$WORK/termed/checkpoints/latest" 2>/dev/null)
  [ -n "$step" ] && [ "$step" -ge 6 ] && break
  sleep 0.01
done
kill -TERM "$pid"
wait "$pid"
check "SIGTERM exits 75 (preempted)" test $? -eq 75
check "and says so" grep -q "reel train: preempted (SIGTERM) after step" "$WORK/termed.err"
check "its checkpoint is of the step it stopped at" python3 -c "
import json, re, sys
stopped = int(re.search(r'after step (\d+)', open(sys.argv[1]).read()).group(1))
latest = json.load(open(sys.argv[2]))['step']
assert latest == stopped and stopped < 40, (latest, stopped)" "$WORK/termed.err" "$WORK/termed/checkpoints/latest"
check "resumed after the preemption" bash -c "'$REEL' train --config '$WORK/termed.yaml' --resume --quiet > /dev/null 2>&1"
check "the preempted run's loss curve equals the uninterrupted one" \
  python3 "$(dirname "$0")/same_steps.py" "$WORK/whole/metrics.jsonl" "$WORK/termed/metrics.jsonl" 40

check "eval of the last checkpoint" bash -c "'$REEL' eval --config '$WORK/whole.yaml' --json > '$WORK/eval.json'"
check "eval matches the run's final report" python3 -c "
import json, sys
a = json.load(open('$WORK/eval.json')); b = json.load(open('$WORK/whole/eval.json'))
assert a == b, (a['top1'], b['top1'])"
check "multi-clip eval" bash -c "'$REEL' eval --config '$WORK/whole.yaml' --clips 3 --out '$WORK/eval3.json' > '$WORK/eval3.txt'"
check "it prints the report" grep -q '^clips 48 .* videos 8 ' "$WORK/eval3.txt"
check "with the confusion matrix, one row per class" \
  bash -c "grep -A9 '^confusion' '$WORK/eval3.txt' | grep -cE '^ +[0-9]+ [A-Za-z]+ ( +[0-9]+){8}$' | grep -qx 8"
check "and writes it to --out" python3 -c "
import json, sys
r = json.load(open(sys.argv[1])); assert r['clips'] == 48 and len(r['confusion']) == 8, r" "$WORK/eval3.json"

# Mistakes.
"$REEL" train --config "$WORK/whole.yaml" --quiet > "$WORK/again.out" 2>&1
check "a rerun without --resume exits 6" test $? -eq 6
check "and says to pass --resume" grep -q -- "--resume" "$WORK/again.out"
sed 's/^optimizer:/optimiser:/' "$WORK/whole.yaml" > "$WORK/typo.yaml"
"$REEL" train --config "$WORK/typo.yaml" > "$WORK/typo.out" 2>&1
check "an unknown key exits 3" test $? -eq 3
check "naming file, line and key" grep -q "typo.yaml:6:1: unknown key 'optimiser'" "$WORK/typo.out"
"$REEL" train --config "$WORK/whole.yaml" --set data.batch_size=0 > "$WORK/set.out" 2>&1
check "a bad --set value exits 3" test $? -eq 3
"$REEL" train --config "$WORK/missing.yaml" > /dev/null 2>&1
check "a missing config exits 2" test $? -eq 2
"$REEL" eval --config "$WORK/killed.yaml" --set checkpoint.uri="$WORK/none" > "$WORK/none.out" 2>&1
check "eval without checkpoints exits 2" test $? -eq 2

# The registry: a finished run registers itself; a fine-tune starts from that version.
export REEL_REGISTRY_URI="$WORK/registry"
tiny_config base "{max_steps: 6, eval_every_epochs: 0}" "{every_steps: 0}"
check "a run with registry.model registers its model" bash -c "'$REEL' train --config '$WORK/base.yaml' --quiet --set registry.model=tiny 'registry.aliases=[production]' > '$WORK/reg.out' 2>&1"
check "and prints the version" grep -q "^registered models:/tiny/1$" "$WORK/reg.out"
check "with the alias set" bash -c "'$REEL' models show models:/tiny@production --json | grep -q '\"version\": 1'"
check "a rerun of the finished run registers nothing new" bash -c "'$REEL' train --config '$WORK/base.yaml' --resume --quiet --set registry.model=tiny 2>&1 | grep -q '^registered models:/tiny/1$'"
tiny_config tune "{max_steps: 4, eval_every_epochs: 0}" "{every_steps: 0}"
check "a fine-tune from model.init" bash -c "'$REEL' train --config '$WORK/tune.yaml' --quiet --set model.init=models:/tiny@production registry.model=tiny registry.branch=tune > '$WORK/tune.out' 2>&1"
check "it says where it started" grep -q "starting from the weights of models:/tiny@production" "$WORK/tune.out"
check "its parent is the version it started from" bash -c "'$REEL' models show models:/tiny/2 | grep -q 'parents       models:/tiny/1'"
check "on its branch" bash -c "'$REEL' models log tiny/tune | grep -q 'train .*models:/tiny/2'"
check "eval --model of the registered version" bash -c "'$REEL' eval --config '$WORK/tune.yaml' --model models:/tiny/2 --json > '$WORK/eval-model.json'"
check "matches eval of the checkpoint it came from" bash -c "'$REEL' eval --config '$WORK/tune.yaml' --json | cmp -s - '$WORK/eval-model.json'"
"$REEL" eval --config "$WORK/tune.yaml" --model models:/tiny/9 > /dev/null 2>&1
check "eval --model of an unknown version exits 2" test $? -eq 2
"$REEL" eval --config "$WORK/tune.yaml" --model models:/tiny/2 --checkpoint "$WORK/tune/checkpoints" > /dev/null 2>&1
check "eval --model with --checkpoint exits 3" test $? -eq 3
"$REEL" train --config "$WORK/tune.yaml" --quiet --set run_dir="$WORK/tune2" model.init=models:/tiny/9 > "$WORK/init.out" 2>&1
check "an unknown model.init exits 2" test $? -eq 2
check "naming it" grep -q "no version 9" "$WORK/init.out"

# registry.best: the checkpoint of the best evaluation is kept and registered beside the final.
config best
check "a run with registry.best" bash -c "'$REEL' train --config '$WORK/best.yaml' --quiet --set registry.model=champ registry.best=true 'registry.aliases=[production]' > /dev/null 2>&1"
"$REEL" models show models:/champ@best --json > "$WORK/best.json" 2> /dev/null
"$REEL" models show models:/champ@production --json > "$WORK/final.json" 2> /dev/null
check "models:/champ@best is the best evaluation's checkpoint" python3 - "$WORK/best/metrics.jsonl" "$WORK/best.json" "$WORK/final.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
evals = [l for l in lines if l.get("event") in ("eval", "final_eval")]
best, final = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
top = max(e["top1"] for e in evals)
first_best = next(e for e in evals if e["top1"] == top)  # the first evaluation to reach it
assert best["metrics"]["top1"] == top, (best["metrics"]["top1"], top)
assert best["recipe"]["step"] == first_best["step"], (best["recipe"], first_best)
assert best["tags"].get("checkpoint") == "best" and best["recipe"]["checkpoint"] == "best"
assert final["recipe"]["step"] == evals[-1]["step"]
# the final version is the branch head: a new one, or the best itself when they are the same
assert final["version"] > best["version"] or final["weights"]["id"] == best["weights"]["id"]
PY
versions=$("$REEL" models ls champ --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
check "a rerun of the finished run registers neither again" bash -c "'$REEL' train --config '$WORK/best.yaml' --resume --quiet --set registry.model=champ registry.best=true > /dev/null 2>&1 && test \$('$REEL' models ls champ --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') -eq $versions"
"$REEL" train --config "$WORK/best.yaml" --quiet --set run_dir="$WORK/best2" registry.best=true > "$WORK/nomodel.out" 2>&1
check "registry.best without registry.model exits 3" test $? -eq 3

finish
