#!/usr/bin/env bash
# Does it learn? The main job's recipe end to end: `reel datagen` (8 motion classes that no
# single frame tells apart), `reel ingest`, then `reel train --nproc 2` (data parallel, as the
# main job) with configs/synthetic.yaml. The
# small R(2+1)D must reach at least 90% validation top-1; the same trainer with a single-frame
# model must stay near chance (12.5%).
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
    --set data.dataset='$WORK/ds' run_dir='$WORK/$model' model.name=$model > '$WORK/$model.out' 2>&1"
  echo "     $model: $(grep '^validation' "$WORK/$model.out") ($(( $(date +%s) - start )) s)"
  # A failed run shows why: the last lines the launcher and both workers printed.
  grep -q '^validation' "$WORK/$model.out" || tail -n 40 "$WORK/$model.out" | sed 's/^/     | /'
done
top1() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['top1'])" "$WORK/$1/eval.json"; }
check "R(2+1)D reaches 90% validation top-1" python3 -c "import sys; sys.exit(0 if $(top1 r2plus1d) >= 0.9 else 1)"
check "the single-frame model stays near chance" python3 -c "import sys; sys.exit(0 if $(top1 single_frame) <= 0.3 else 1)"

finish
