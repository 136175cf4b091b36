#!/usr/bin/env bash
# `reel predict` end to end with the previous release's checkpoint: testdata/videos as JSON lines
# (the corrupt video an error line, a rerun that writes nothing), a CSV list with labels, runs
# killed with SIGKILL part-way (at the worst point with REEL_CRASH_AT, and by kill -9 from
# outside) and resumed: every input exactly once, scored as an uninterrupted run scores it; bad
# command lines.
# Usage: predict_cli_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"
VIDEOS="$SRC/testdata/videos"
export REEL_LOG_LEVEL=error  # FFmpeg's warnings about the corrupt video
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# check_output OUT KEYS_FILE [CLEAN_OUT]: every key of KEYS_FILE exactly once in OUT's parts,
# the parts exactly those progress.json lists, a well-formed line each, and with CLEAN_OUT the
# same scores as the clean run for the same video (keys "many/rN-NAME" are copies of "NAME").
cat > "$WORK/check_output.py" <<'PY'
import collections, json, os, sys
out, keys_file = sys.argv[1], sys.argv[2]
progress = json.load(open(f"{out}/progress.json"))
listed = [p["name"] for p in progress["parts"]]
on_disk = sorted(f for f in os.listdir(out) if f.startswith("part-"))
assert sorted(listed) == on_disk, (listed, on_disk)
lines = []
for part in progress["parts"]:
    text = open(f"{out}/{part['name']}").read().splitlines()
    assert len(text) == part["lines"], part
    lines += [json.loads(t) for t in text]
counts = collections.Counter(line["key"] for line in lines)
want = open(keys_file).read().split()
assert sorted(counts) == sorted(want), sorted(set(want) ^ set(counts))[:5]
assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1][:5]
assert progress["complete"] is True
clean = {}
if len(sys.argv) > 3:
    for name in sorted(os.listdir(sys.argv[3])):
        if name.startswith("part-"):
            for t in open(f"{sys.argv[3]}/{name}").read().splitlines():
                line = json.loads(t)
                clean[line["key"]] = line.get("top", line.get("error"))
for line in lines:
    if "error" in line:
        assert "decord_corrupted" in line["key"] and "not a video" in line["error"], line
        continue
    top = line["top"]
    assert len(top) == progress["settings"]["top_k"], line
    assert all(0 <= t["score"] <= 1 and 0 <= t["index"] < 8 for t in top), line
    assert [t["score"] for t in top] == sorted((t["score"] for t in top), reverse=True), line
    if clean:
        assert top == clean[line["key"].split("-", 1)[-1]], line
PY
check_output() { python3 "$WORK/check_output.py" "$@"; }

# --- a folder of videos ------------------------------------------------------------------------
ls "$VIDEOS" > "$WORK/video_keys"
check "predict testdata/videos" bash -c \
  "'$REEL' predict '$CKPT' '$VIDEOS' '$WORK/clean' --top-k 3 --part-size 4 > '$WORK/clean.out'"
check "the summary line" grep -q "predicted 22 of 22 videos (1 could not be decoded; 0 finished earlier)" \
  "$WORK/clean.out"
check "each video once, top 3 labels, the corrupt one an error line" \
  check_output "$WORK/clean" "$WORK/video_keys"
check "6 parts of at most 4 lines" test "$(ls "$WORK/clean" | grep -c '^part-.*\.jsonl$')" -eq 6
md5sum "$WORK"/clean/part-* > "$WORK/clean.md5"
check "a rerun finds everything done" bash -c \
  "'$REEL' predict '$CKPT' '$VIDEOS' '$WORK/clean' --top-k 3 --part-size 4 | grep -q 'predicted 0 of 22 videos (0 could not be decoded; 22 finished earlier)'"
check "and leaves the parts as they were" md5sum --quiet -c "$WORK/clean.md5"

# --- a CSV list of 88 inputs: the videos four times over, with labels ------------------------------
mkdir -p "$WORK/list/many"
echo "path,label" > "$WORK/list/videos.csv"
: > "$WORK/many_keys"
for r in 1 2 3 4; do
  for f in "$VIDEOS"/*; do
    name=$(basename "$f")
    ln -s "$f" "$WORK/list/many/r$r-$name"
    echo "many/r$r-$name,$name" >> "$WORK/list/videos.csv"
    echo "many/r$r-$name" >> "$WORK/many_keys"
  done
done
args=(--top-k 3 --part-size 1 --workers 2)

# Killed at the worst point: part-00002.jsonl written, progress.json not yet naming it.
(REEL_CRASH_AT=Predict:PartWritten:3 "$REEL" predict "$CKPT" "$WORK/list/videos.csv" \
  "$WORK/crashed" "${args[@]}") > /dev/null 2>&1  # a subshell, so that bash's "Killed" stays quiet
check "REEL_CRASH_AT killed the run with SIGKILL" test $? -eq 137
check "it left part-00002.jsonl unlisted" python3 -c "
import json, os, sys
parts = [p['name'] for p in json.load(open('$WORK/crashed/progress.json'))['parts']]
assert parts == ['part-00000.jsonl', 'part-00001.jsonl'], parts
assert os.path.exists('$WORK/crashed/part-00002.jsonl')"
check "the rerun finishes" bash -c "'$REEL' predict '$CKPT' '$WORK/list/videos.csv' '$WORK/crashed' \
  ${args[*]} > '$WORK/crashed.out'"
check "skipping the 2 finished inputs (the corrupt video's first copy among them)" \
  grep -q "predicted 86 of 88 videos (3 could not be decoded; 2 finished earlier)" \
  "$WORK/crashed.out"
check "every input exactly once, scored as in the clean run" \
  check_output "$WORK/crashed" "$WORK/many_keys" "$WORK/clean"
check "the true labels are kept" grep -q '"key":"many/r2-mmaction2_test.mp4","source":"file://[^"]*","true_label":"mmaction2_test.mp4","top"' \
  "$WORK"/crashed/part-*

# Killed by kill -9 from outside once a few parts are finished.
"$REEL" predict "$CKPT" "$WORK/list/videos.csv" "$WORK/killed" "${args[@]}" > /dev/null 2>&1 &
PID=$!
for _ in $(seq 1 1200); do
  grep -q 'part-00003.jsonl' "$WORK/killed/progress.json" 2>/dev/null && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.05
done
kill -9 "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
PID=""
check "the killed run was part-way" grep -q '"complete":false' "$WORK/killed/progress.json"
check "the rerun finishes" bash -c "'$REEL' predict '$CKPT' '$WORK/list/videos.csv' '$WORK/killed' \
  ${args[*]} > '$WORK/killed.out'"
check "skipping what was finished" grep -Eq "; [1-9][0-9]* finished earlier\)" "$WORK/killed.out"
check "every input exactly once after kill -9, scored as in the clean run" \
  check_output "$WORK/killed" "$WORK/many_keys" "$WORK/clean"

# --- bad command lines: one line on stderr, the README's exit codes ---------------------------------
# expect_failure CODE PATTERN ARGS...: `reel predict ARGS` exits CODE with one stderr line matching
# PATTERN (CLI11 adds "Run with --help ..." after a bad flag).
expect_failure() {
  local code=$1 pattern=$2; shift 2
  "$REEL" predict "$@" > /dev/null 2> "$WORK/err"
  local got=$?
  grep -v '^Run with --help' "$WORK/err" > "$WORK/err1"
  [ "$got" -eq "$code" ] && [ "$(wc -l < "$WORK/err1")" -eq 1 ] && grep -q "$pattern" "$WORK/err1" ||
    { echo "  exit $got: $(cat "$WORK/err")"; return 1; }
}
check "no videos there: 2" expect_failure 2 "no videos under" "$CKPT" "$WORK/nothing" "$WORK/o1"
check "a missing model: 2" expect_failure 2 "" "$WORK/missing.safetensors" "$VIDEOS" "$WORK/o2"
check "--top-k 0: 3" expect_failure 3 "top-k" "$CKPT" "$VIDEOS" "$WORK/o3" --top-k 0
printf 'file\na.mp4\n' > "$WORK/nopath.csv"
check "a list without a path column: 3" expect_failure 3 "nopath.csv:1:" "$CKPT" "$WORK/nopath.csv" "$WORK/o4"
check "another setting into the same output: 6" \
  expect_failure 6 "write to another output" "$CKPT" "$VIDEOS" "$WORK/clean" --top-k 2
finish
