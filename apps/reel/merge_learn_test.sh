#!/usr/bin/env bash
# Does a merge keep both skills? The main job's R(2+1)D and recipe (configs/synthetic.yaml), for
# real: a parent trained briefly on all 8 datagen classes and registered, then two fine-tunes of
# it, A on the four movement classes only and B on the four rotate/grow/shrink classes only. Each
# forgets the other's classes. The three-way merge of A and B against their common parent
# (average, and task arithmetic) must keep most of each side's accuracy on its own classes. About
# 4 minutes on 2 cores.
# Every accuracy is measured with `reel eval --model` on the class subset's test videos.
# Usage: merge_learn_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
source "$SRC/configs/synthetic-data.sh"  # the main job's clips
export REEL_REGISTRY_URI="$WORK/registry"

check "datagen" "$REEL" datagen --out "$WORK/raw" --per-class 40 --quiet
# A class-subset copy of the raw folder. classInd.txt keeps all 8 classes, so a class has the same
# index, and the same row of the classifier, in every dataset. The flip and reverse pairs of the
# recipe stay inside each half.
subset() { # subset NAME CLASS...
  local out="$WORK/raw-$1" pattern
  shift
  pattern="^($(IFS='|'; echo "$*"))/"
  mkdir -p "$out"
  cp "$WORK/raw/classInd.txt" "$out/"
  for c in "$@"; do cp -r "$WORK/raw/$c" "$out/"; done
  grep -E "$pattern" "$WORK/raw/trainlist01.txt" > "$out/trainlist01.txt"
  grep -E "$pattern" "$WORK/raw/testlist01.txt" > "$out/testlist01.txt"
}
mapfile -t classes < <(awk '{print $2}' "$WORK/raw/classInd.txt")
subset a "${classes[@]:0:4}"
subset b "${classes[@]:4:4}"
for ds in all a b; do
  raw="$WORK/raw-$ds"
  [ "$ds" = all ] && raw="$WORK/raw"
  check "ingest $ds" bash -c "'$REEL' ingest '$raw' '$WORK/ds-$ds' ${SYNTHETIC_INGEST_ARGS[*]} > /dev/null"
done

# In fp32, on every CPU: the thresholds below assume a parent that one epoch leaves far from done,
# and bf16 autocast (amp: auto on a CPU with bf16 units) trains it further (0.947 on A's classes
# after one epoch), leaving a fine-tune nothing to show.
train() { # train NAME DATASET EPOCHS [--set overrides...]: registers models:/merge on branch NAME
  local name=$1 ds=$2 epochs=$3
  shift 3
  "$REEL" train --config "$SRC/configs/synthetic.yaml" --nproc 2 --quiet --set train.amp=off \
    data.dataset="$WORK/ds-$ds" run_dir="$WORK/run-$name" train.epochs="$epochs" \
    registry.model=merge registry.branch="$name" "$@" > "$WORK/$name.out" 2>&1 ||
    { tail -n 30 "$WORK/$name.out" | sed 's/^/     | /'; return 1; }
}
top1() { # top1 URI DATASET: validation top-1 of a registered version on a dataset's test split
  "$REEL" eval --config "$SRC/configs/synthetic.yaml" --set train.amp=off data.dataset="$WORK/ds-$2" \
    --model "$1" --out "$WORK/eval.json" > "$WORK/eval.out" 2>&1 &&
    python3 -c "import json, sys; print(round(json.load(open(sys.argv[1]))['top1'], 3))" \
      "$WORK/eval.json" || { echo "eval of $1 failed:" >&2; tail -n 5 "$WORK/eval.out" >&2; echo nan; }
}

# One epoch leaves the parent far from done on most classes; each fine-tune then learns its half.
check "train the parent on all classes" train parent all 1
for side in a b; do
  check "fine-tune ${side^^} on its classes" train "$side" "$side" 4 model.init=models:/merge/1 \
    optimizer.lr=0.001 schedule.warmup_epochs=0
done
check "merge: average" bash -c "'$REEL' models merge models:/merge/2 models:/merge/3 --strategy average --into merge/avg > /dev/null"
check "merge: task arithmetic" bash -c "'$REEL' models merge models:/merge/2 models:/merge/3 --strategy task-arithmetic --scale 1 --into merge/ta > /dev/null"
check "merge: TIES" bash -c "'$REEL' models merge models:/merge/2 models:/merge/3 --strategy ties --scale 1 --density 0.5 --into merge/ties > /dev/null"

declare -A acc
for v in 1 2 3 4 5 6; do
  for ds in a b; do acc[$v$ds]=$(top1 "models:/merge/$v" "$ds"); done
done
printf '     %-22s %8s %8s\n' "top-1 on the classes of" A B
names=([1]=parent [2]="A (fine-tuned on A)" [3]="B (fine-tuned on B)" [4]="merge, average"
  [5]="merge, task arithmetic" [6]="merge, TIES")
for v in 1 2 3 4 5 6; do printf '     %-22s %8s %8s\n' "${names[$v]}" "${acc[${v}a]}" "${acc[${v}b]}"; done

# "Most of both skills": each fine-tune learned its classes and forgot the others, and the merges
# by average and by task arithmetic keep at least two thirds of A's accuracy on A's classes and
# of B's on B's. LibTorch picks its kernels by the CPU's vector units, and the training, the
# same seeds notwithstanding, with them: on an AMD EPYC without AVX-512 the average kept 0.763
# of A's 1.0 and 0.667 of B's 0.909 (73%), where machines with it kept three quarters of both.
# TIES is printed, not checked: trimming half of every tensor's change, batch-norm statistics
# included, cost A's skill here (docs/architecture.md, registry).
ge() { python3 -c "import sys; sys.exit(0 if $1 >= $2 else 1)"; }
for side in a b; do
  v=2
  other=b
  [ "$side" = b ] && v=3 && other=a
  # Gained 0.2 on the parent, or all but mastered them: one epoch can leave the parent biased
  # toward one half already (0.987 on A's classes, 0.091 on B's, on an AMD EPYC here).
  check "${side^^} learned its classes" ge "${acc[$v$side]}" "max(0.6, min(0.95, ${acc[1$side]} + 0.2))"
  check "${side^^} forgot the other half" ge 0.3 "${acc[$v$other]}"
done
for v in 4 5; do
  check "${names[$v]} keeps A's skill" ge "${acc[${v}a]}" "2 / 3 * ${acc[2a]}"
  check "${names[$v]} keeps B's skill" ge "${acc[${v}b]}" "2 / 3 * ${acc[3b]}"
done
finish
