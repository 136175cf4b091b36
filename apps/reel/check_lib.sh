# Shared by the `reel` command-line test scripts (sourced, not run): a scratch folder $WORK
# removed on exit, `check DESCRIPTION COMMAND...` (the command must succeed), `finish`, and a
# tiny dataset and training config for the scripts that train (they set $REEL first).
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passes=0
failures=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passes=$((passes + 1)); else echo "FAIL $what"; failures=$((failures + 1)); fi
}
finish() {
  echo "$passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# tiny_dataset: 3 datagen videos per class (40x32, 16 frames) in $WORK/raw, ingested as 8-frame
# clips at short side 32 into $WORK/ds.
tiny_dataset() {
  check "datagen" "$REEL" datagen --out "$WORK/raw" --per-class 3 --width 40 --height 32 --min-frames 16 \
    --max-frames 16 --seed 5 --threads 2 --quiet
  check "ingest" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/ds' --clip-frames 8 --short-side 32 --shard-mib 0.0625 > /dev/null 2>&1"
}

# tiny_config NAME TRAIN CHECKPOINT [MORE]: $WORK/NAME.yaml, a tiny R(2+1)D run on $WORK/ds
# writing into $WORK/NAME; TRAIN and CHECKPOINT are those sections' flow maps, MORE extra lines.
tiny_config() {
  cat > "$WORK/$1.yaml" <<YAML
run_dir: $WORK/$1
seed: 4
threads: 1
model: {name: r2plus1d, num_classes: 8, width: 4, layers: [1, 1, 1, 1]}
data: {dataset: $WORK/ds, batch_size: 2, workers: 1, clip_frames: 4, frame_stride: 2, size: 24}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
schedule: {warmup_steps: 4}
train: $2
checkpoint: $3
${4:-}
YAML
}

# wait_for_checkpoint NAME STEP: until the run $WORK/NAME's latest checkpoint is at STEP or later
# (60 s at most).
wait_for_checkpoint() {
  for _ in $(seq 1 6000); do
    step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$WORK/$1/checkpoints/latest" 2>/dev/null)
    [ -n "$step" ] && [ "$step" -ge "$2" ] && return 0
    sleep 0.01
  done
  return 1
}
# The processes of `reel train --config $WORK/NAME.yaml` (a job's workers), for SIGSTOP/SIGCONT.
trainers_of() { pgrep -f -- "^[^ ]*reel(-torch)? train --config $WORK/$1.yaml"; }
