#!/usr/bin/env bash
# `reel datagen` + `reel ingest` end to end, including a run killed with SIGKILL in the middle
# and resumed: the resumed dataset must hold exactly the clips of an uninterrupted run, each once.
# Usage: ingest_cli_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

check "datagen" "$REEL" datagen --out "$WORK/raw" --per-class 6 --width 64 --height 64 --seed 7 --threads 2
check "datagen wrote UCF101 split lists" test -s "$WORK/raw/trainlist01.txt" -a -s "$WORK/raw/classInd.txt"

args=(--mode frames --clip-frames 4 --short-side 48 --shard-mib 0.0625 --zstd-level 1 --workers 1)
check "uninterrupted ingest" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/clean' ${args[*]} > '$WORK/clean.out' 2>&1"

# Start again into another root and kill it once it has checkpointed a few shards.
"$REEL" ingest "$WORK/raw" "$WORK/killed" "${args[@]}" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  shards=$(ls "$WORK/killed/train/" 2>/dev/null | grep -c '\.idx$')
  [ -f "$WORK/killed/_ingest/state.json" ] && [ "$shards" -ge 3 ] && break
  sleep 0.02
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "the killed run left no manifest" test ! -e "$WORK/killed/manifest.json"
check "the killed run left a checkpoint" test -f "$WORK/killed/_ingest/state.json"

check "resumed ingest" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/killed' ${args[*]} > '$WORK/resumed.out' 2>&1"
check "the resumed run skipped finished videos" grep -Eq '\(([1-9][0-9]*) finished earlier\)' "$WORK/resumed.out"

# Every clip exactly once, the same keys and bytes as the clean run (read with Python's tarfile,
# as a WebDataset user would).
compare=$(cat <<'PY'
import json, sys, tarfile, collections
def load(root):
    manifest = json.load(open(f"{root}/manifest.json"))
    payloads, counts = {}, collections.Counter()
    for split, info in manifest["splits"].items():
        for shard in info["shards"]:
            with tarfile.open(f"{root}/{split}/{shard['name']}.tar") as tar:
                for member in tar.getmembers():
                    if member.name.endswith(".frames.zst"):
                        key = member.name[:-len(".frames.zst")]
                        counts[key] += 1
                        payloads[key] = tar.extractfile(member).read()
    return manifest, payloads, counts
m1, p1, c1 = load(sys.argv[1])
m2, p2, c2 = load(sys.argv[2])
dupes = [k for k, n in c2.items() if n > 1]
assert not dupes, f"clips written twice: {dupes[:5]}"
assert set(p1) == set(p2), f"different clips: {sorted(set(p1) ^ set(p2))[:5]}"
assert all(p1[k] == p2[k] for k in p1), "clip bytes differ"
assert m1["splits"]["train"]["records"] == m2["splits"]["train"]["records"]
print(f"{len(p2)} clips, none twice, identical to the clean run")
PY
)
check "resumed dataset equals the clean one" /usr/bin/python3 -c "$compare" "$WORK/clean" "$WORK/killed"
check "no checkpoint left after finishing" test ! -e "$WORK/killed/_ingest/state.json"

# A second run over a complete dataset does nothing; other settings need --overwrite.
check "rerun is a no-op" bash -c "'$REEL' ingest '$WORK/raw' '$WORK/clean' ${args[*]} | grep -q 'already complete'"
"$REEL" ingest "$WORK/raw" "$WORK/clean" --mode frames --clip-frames 8 > /dev/null 2> "$WORK/err"; code=$?
check "other settings refused" test "$code" -ne 0
check "refusal explains --overwrite" grep -q -- "--overwrite" "$WORK/err"
"$REEL" ingest "$WORK/raw" "$WORK/x" --mode pictures > /dev/null 2> "$WORK/err"; code=$?
check "bad mode exits 3" test "$code" -eq 3

finish
