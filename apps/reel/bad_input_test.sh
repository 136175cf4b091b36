#!/usr/bin/env bash
# Every command's bad inputs end in one clear line on stderr, naming the file and what is wrong,
# with the README's exit codes (2 not found, 3 invalid argument, 4 permission denied, 1 corrupt
# data or anything else): never an abort, a core dump or an exception's raw text; and nothing
# the command was given is changed or deleted.
# Usage: bad_input_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

tiny_dataset
tiny_config good "{max_steps: 4, log_every: 1, eval_every_epochs: 0}" "{every_steps: 2, keep: 2}"
check "a good run to break copies of" bash -c "'$REEL' train --config '$WORK/good.yaml' --quiet > /dev/null 2>&1"
STEP=$WORK/good/checkpoints/step-0000000004
check "its checkpoint" test -f "$STEP/model.safetensors"

# fingerprint DIR...: every file's path, size and content hash, for "nothing was changed".
fingerprint() { [ $# -eq 0 ] && return; find "$@" -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }

# fails NAME CODE PATTERN INPUTS -- COMMAND...: COMMAND exits CODE; its stderr's last line matches
# the extended regex PATTERN; no line shows a crash; the files under INPUTS (a quoted list of
# paths) are as before.
fails() {
  local name=$1 code=$2 pattern=$3 inputs=$4
  shift 5
  local before after status last
  before=$(fingerprint $inputs)
  "$@" > "$WORK/out.txt" 2> "$WORK/err.txt"
  status=$?
  after=$(fingerprint $inputs)
  last=$(grep -v '^\s*$' "$WORK/err.txt" | tail -1)
  local ok=1
  [ "$status" -eq "$code" ] || { echo "     exit $status, expected $code"; ok=0; }
  grep -Eq -- "$pattern" <<<"$last" || { echo "     last line: $last"; echo "     expected:  $pattern"; ok=0; }
  if grep -Eqi "terminate called|core dumped|Aborted|Segmentation|what\(\):|Check failed" "$WORK/err.txt"; then
    echo "     crashed:"; sed 's/^/       /' "$WORK/err.txt" | tail -5; ok=0
  fi
  [ "$before" = "$after" ] || { echo "     the inputs changed"; ok=0; }
  check "$name" test "$ok" -eq 1
}

# Copies of the good run with one thing broken, each with its own config.
broken_run() {  # broken_run NAME: $WORK/NAME (a copy of the good run) and $WORK/NAME.yaml
  cp -r "$WORK/good" "$WORK/$1"
  sed "s|run_dir: $WORK/good|run_dir: $WORK/$1|" "$WORK/good.yaml" > "$WORK/$1.yaml"
}

# Checkpoints.
broken_run truncated
model=$WORK/truncated/checkpoints/step-0000000004/model.safetensors
truncate -s $(($(stat -c %s "$model") / 2)) "$model"
fails "eval of a truncated checkpoint" 1 "model.safetensors.*(corrupt|truncated)" "$WORK/truncated" -- \
  "$REEL" eval --config "$WORK/truncated.yaml"
fails "resuming from a truncated checkpoint" 1 "model.safetensors.*(corrupt|truncated)" "$WORK/truncated/checkpoints" -- \
  "$REEL" train --config "$WORK/truncated.yaml" --resume --quiet

broken_run flipped
state=$WORK/flipped/checkpoints/step-0000000004/state.safetensors
python3 - "$state" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x10; open(p, 'wb').write(bytes(b))
PY
fails "resuming from a bit-flipped checkpoint" 1 "state.safetensors is corrupt" "$WORK/flipped/checkpoints" -- \
  "$REEL" train --config "$WORK/flipped.yaml" --resume --quiet

broken_run pointer
echo '{"step": "four"' > "$WORK/pointer/checkpoints/latest"
fails "a corrupt latest pointer" 1 "checkpoints/latest is not a checkpoint pointer" "$WORK/pointer/checkpoints" -- \
  "$REEL" eval --config "$WORK/pointer.yaml"

# Configs.
printf 'run_dir: %s/x\nmodel: {name: r2plus1d\n' "$WORK" > "$WORK/malformed.yaml"
fails "a malformed YAML config" 3 "malformed.yaml:[0-9]+:[0-9]+: " "$WORK/malformed.yaml" -- \
  "$REEL" train --config "$WORK/malformed.yaml"
sed 's/^seed:/sede:/' "$WORK/good.yaml" > "$WORK/unknown.yaml"
fails "an unknown config key" 3 "unknown.yaml:[0-9]+:[0-9]+: unknown key 'sede'" "$WORK/unknown.yaml" -- \
  "$REEL" train --config "$WORK/unknown.yaml"
fails "a wrong-typed --set value" 3 "data.batch_size.*(integer|number)" "$WORK/good.yaml" -- \
  "$REEL" train --config "$WORK/good.yaml" --set data.batch_size=four
fails "a missing config" 2 "nope.yaml" "" -- "$REEL" train --config "$WORK/nope.yaml"

# Datasets: copies of the good one with one thing broken, trained on by a fresh run.
broken_dataset() {  # broken_dataset NAME: $WORK/NAME-ds and $WORK/NAME-ds.yaml training on it
  cp -r "$WORK/ds" "$WORK/$1-ds"
  sed "s|run_dir: $WORK/good|run_dir: $WORK/$1-run|; s|dataset: $WORK/ds|dataset: $WORK/$1-ds|" \
    "$WORK/good.yaml" > "$WORK/$1-ds.yaml"
}
broken_dataset truncated
tar=$(ls "$WORK/truncated-ds/train/"*.tar | head -1)
truncate -s $(($(stat -c %s "$tar") / 2)) "$tar"
fails "training on a truncated shard" 1 "shard-[0-9]+.*(truncated|corrupt|short|size)" "$WORK/truncated-ds" -- \
  "$REEL" train --config "$WORK/truncated-ds.yaml" --quiet

broken_dataset index
idx=$(ls "$WORK/index-ds/train/"*.idx | head -1)
other=$(ls "$WORK/index-ds/train/"*.idx | tail -1)
[ "$idx" != "$other" ] && cp "$other" "$idx"
fails "a shard whose .idx disagrees with its tar" 1 "shard-[0-9]+.*(index|idx)" "$WORK/index-ds" -- \
  "$REEL" train --config "$WORK/index-ds.yaml" --quiet

broken_dataset missing
rm "$(ls "$WORK/missing-ds/train/"*.tar | tail -1)"
fails "a manifest naming a missing shard" 2 "shard-[0-9]+\.tar.*(missing|not found|lacks|NotFound)" "$WORK/missing-ds" -- \
  "$REEL" train --config "$WORK/missing-ds.yaml" --quiet

mkdir -p "$WORK/empty-src"
fails "ingesting an empty folder" 2 "no videos .*empty-src" "$WORK/empty-src" -- \
  "$REEL" ingest "$WORK/empty-src" "$WORK/empty-out"
sed "s|dataset: $WORK/ds|dataset: $WORK/empty-src|" "$WORK/good.yaml" > "$WORK/empty.yaml"
fails "training on a folder that is no dataset" 2 "empty-src.*manifest.json" "$WORK/empty-src" -- \
  "$REEL" train --config "$WORK/empty.yaml" --quiet

mkdir -p "$WORK/notvideo/Clap"
head -c 5000 /dev/urandom > "$WORK/notvideo/Clap/noise.avi"
echo "not a video" > "$WORK/notvideo/Clap/text.mp4"
fails "ingesting only non-video files" 1 "no video of .*notvideo.* could be ingested" "$WORK/notvideo" -- \
  "$REEL" ingest "$WORK/notvideo" "$WORK/notvideo-out"

# An unreadable folder: root reads everything, so the command runs as nobody when this is root.
mkdir -p "$WORK/locked/Clap" && cp "$(ls "$WORK/raw/"*/*.mp4 | head -1)" "$WORK/locked/Clap/"
chmod 000 "$WORK/locked"
as_other=()
reel_for_other=$REEL
if [ "$(id -u)" -eq 0 ]; then
  # nobody may not reach the build folder (a checkout under /root): it runs a copy from $WORK.
  chmod 755 "$WORK"
  mkdir -p "$WORK/bin" && cp "$REEL" "$WORK/bin/reel" && chmod 755 "$WORK/bin" "$WORK/bin/reel"
  reel_for_other=$WORK/bin/reel
  as_other=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
fails "ingesting an unreadable folder" 4 "locked.*(ermission)" "" -- \
  "${as_other[@]}" "$reel_for_other" ingest "$WORK/locked" "$WORK/locked-out"
chmod 755 "$WORK/locked"

finish
