#!/usr/bin/env bash
# `reel features` end to end with the previous release's checkpoint on a tiny datagen dataset:
# the features dataset and its manifest, a head trained on it, head + backbone registered as one
# version that `reel predict` runs on videos; bad command lines with their exit codes, and an
# output that already holds a dataset left as it was.
# Usage: features_cli_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"
export REEL_LOG_LEVEL=error REEL_REGISTRY_URI="$WORK/registry"

tiny_dataset
check "reel features" bash -c "'$REEL' features '$CKPT' '$WORK/ds' '$WORK/feat' > '$WORK/feat.out'"
check "it reports 32 values per embedding" grep -q "embeddings of 32 values" "$WORK/feat.out"
check "the manifest records the mode, width, layer and model" python3 -c "
import json, sys
m = json.load(open('$WORK/feat/manifest.json')); src = json.load(open('$WORK/ds/manifest.json'))
f = m['features']
assert m['mode'] == 'features' and f['dim'] == 32 and f['layer'] == 'avgpool', f
assert f['model']['source'].endswith('testdata/checkpoints/release-0.1.0'), f['model']
assert m['classes'] == src['classes']
assert {s: v['records'] for s, v in m['splits'].items()} == {s: v['records'] for s, v in src['splits'].items()}"

code=0; "$REEL" features "$CKPT" "$WORK/ds" "$WORK/feat" 2> "$WORK/err" || code=$?
check "an output holding a dataset exits 6" test "$code" -eq 6
check "and says so" grep -q "already holds a dataset" "$WORK/err"
check "it is left as it was" python3 -c "import json; json.load(open('$WORK/feat/manifest.json'))"
code=0; "$REEL" features "$CKPT" "$WORK/ds" "$WORK/f2" --layer layer9 2> "$WORK/err" || code=$?
check "an unknown layer exits 3" test "$code" -eq 3
check "and names it" grep -q "unknown layer 'layer9'" "$WORK/err"
code=0; "$REEL" features "$CKPT" "$WORK/nothing" "$WORK/f3" 2> "$WORK/err" || code=$?
check "a missing dataset exits 2" test "$code" -eq 2
code=0; "$REEL" features "$CKPT" "$WORK/feat" "$WORK/f4" 2> "$WORK/err" || code=$?
check "features of features exit 3" test "$code" -eq 3
code=0; "$REEL" ingest "$WORK/raw" "$WORK/f5" --mode features 2> "$WORK/err" || code=$?
check "an ingest in features mode exits 3" test "$code" -eq 3

cat > "$WORK/head.yaml" <<YAML
run_dir: $WORK/head
seed: 2
threads: 1
model: {name: head, num_classes: 8, hidden: [16]}
data: {dataset: $WORK/feat, batch_size: 4, workers: 1}
optimizer: {name: adamw, lr: 0.01}
train: {epochs: 2, log_every: 5}
checkpoint: {every_steps: 0}
YAML
check "a head trains on the features" bash -c "'$REEL' train --config '$WORK/head.yaml' --quiet > '$WORK/head.out' 2>&1"
check "head + backbone register as one version" bash -c "'$REEL' models register tiny-head '$WORK/head' > /dev/null"
check "its architecture is the backbone's with the head's classifier" bash -c \
  "'$REEL' models show models:/tiny-head/1 --json > '$WORK/show.json'"
check "architecture and lineage" python3 -c "
import json
v = json.load(open('$WORK/show.json'))
a = v['architecture']
assert a['name'] == 'r2plus1d' and a['width'] == 4 and a['hidden'] == [16], a
assert v['recipe']['op'] == 'head', v['recipe']"
check "reel predict runs the whole model on videos" bash -c \
  "'$REEL' predict models:/tiny-head/1 '$WORK/raw' '$WORK/preds' > /dev/null"
check "every video is scored" python3 -c "
import glob, json
lines = [json.loads(l) for p in glob.glob('$WORK/preds/part-*.jsonl') for l in open(p)]
assert len(lines) == 24 and all('top' in l for l in lines), len(lines)"

finish
