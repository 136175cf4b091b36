#!/usr/bin/env bash
# Does it learn? The main job's recipe end to end: `reel datagen` (8 motion classes that no
# single frame tells apart), `reel ingest`, then `reel train --nproc 2` (data parallel, as the
# main job) with configs/synthetic.yaml, in half its epochs (4 of 8: the schedule follows, and
# seed 1 reaches 0.99 in 4 as in 8, 0.90 in 3). The small R(2+1)D must reach at least 90%
# validation top-1; the same trainer with a single-frame model must stay near chance (12.5%).
# Usage: learn_test.sh PATH_TO_REEL SOURCE_DIR [VIDEOS_PER_CLASS]
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
source "$SRC/configs/synthetic-data.sh"  # the main job's dataset
[ -z "${3:-}" ] || SYNTHETIC_DATAGEN_ARGS=(--per-class "$3")

check "datagen" "$REEL" datagen --out "$WORK/raw" "${SYNTHETIC_DATAGEN_ARGS[@]}" --quiet
check "ingest" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/ds' ${SYNTHETIC_INGEST_ARGS[*]} > /dev/null"
for model in r2plus1d single_frame; do
  start=$(date +%s)
  check "train $model" bash -c "'$REEL' train --config '$SRC/configs/synthetic.yaml' --nproc 2 --quiet \
    --set data.dataset='$WORK/ds' run_dir='$WORK/$model' model.name=$model train.epochs=4 \
    > '$WORK/$model.out' 2>&1"
  echo "     $model: $(grep '^validation' "$WORK/$model.out") ($(( $(date +%s) - start )) s)"
  # A failed run shows why: the last lines the launcher and both workers printed.
  grep -q '^validation' "$WORK/$model.out" || tail -n 40 "$WORK/$model.out" | sed 's/^/     | /'
done
top1() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['top1'])" "$WORK/$1/eval.json"; }
check "R(2+1)D reaches 90% validation top-1" python3 -c "import sys; sys.exit(0 if $(top1 r2plus1d) >= 0.9 else 1)"
check "the single-frame model stays near chance" python3 -c "import sys; sys.exit(0 if $(top1 single_frame) <= 0.3 else 1)"

# Features: a linear head trained on the trained R(2+1)D's embeddings (reel features) reaches the
# backbone's own validation top-1 in seconds; registered, head and frozen backbone are one
# version that scores the videos' clips as the head scored their embeddings.
check "reel features" bash -c "'$REEL' features '$WORK/r2plus1d' '$WORK/ds' '$WORK/feat' > '$WORK/feat.out'"
cat > "$WORK/head.yaml" <<YAML
run_dir: $WORK/head
seed: 1
threads: 2
model: {name: head, num_classes: 8}
data: {dataset: $WORK/feat, batch_size: 32, workers: 1}
optimizer: {name: adamw, lr: 0.01, weight_decay: 0.0}
train: {epochs: 10, log_every: 20}
checkpoint: {every_steps: 0}
YAML
start=$(date +%s)
check "train a head on the features" bash -c "'$REEL' train --config '$WORK/head.yaml' --quiet > '$WORK/head.out' 2>&1"
head_s=$(( $(date +%s) - start ))
echo "     head: $(grep '^validation' "$WORK/head.out") (${head_s} s; backbone $(top1 r2plus1d))"
check "the head trains in under a minute" test "$head_s" -lt 60
check "the head reaches the backbone's top-1 (within 0.02)" \
  python3 -c "import sys; sys.exit(0 if $(top1 head) >= $(top1 r2plus1d) - 0.02 else 1)"
export REEL_REGISTRY_URI="$WORK/registry"
check "head + backbone register as one version" bash -c "'$REEL' models register head '$WORK/head' > /dev/null"
check "the version is the backbone's architecture" bash -c \
  "'$REEL' models show models:/head/1 --json | grep -q '\"name\": *\"r2plus1d\"'"
check "eval of the version on the videos' clips" bash -c "'$REEL' eval --config '$SRC/configs/synthetic.yaml' \
  --set data.dataset='$WORK/ds' run_dir='$WORK/r2plus1d' --model models:/head/1 --json > '$WORK/combined.json'"
check "it scores as the head did (within 0.01)" python3 -c "import json, sys
a = json.load(open('$WORK/combined.json'))['top1']; b = $(top1 head)
print('     combined version top-1', a, 'head', b); sys.exit(0 if abs(a - b) <= 0.01 else 1)"

finish
