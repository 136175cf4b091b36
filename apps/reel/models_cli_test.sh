#!/usr/bin/env bash
# End-to-end checks of `reel models` on an embedded registry (SQLite + local weights), run by
# ctest: register a checkpoint of the previous release, export it bit-exact, register a
# fine-tune of it from a safetensors file, diff, aliases, branches, removal, and bad inputs that
# must change nothing.
# Usage: models_cli_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
export REEL_REGISTRY_URI="$WORK/registry" REEL_USER=ada
CKPT="$SRC/testdata/checkpoints/release-0.1.0"

json() { # json FILE PYTHON-EXPR: prints the expression over the parsed file as `j`
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

check "register a checkpoint store" bash -c "'$REEL' models register clf '$CKPT' -m 'from release 0.1.0' > '$WORK/out'"
check "it says what it stored" grep -q "registered models:/clf/1 on branch main: 128 tensors" "$WORK/out"
check "show --json" bash -c "'$REEL' models show models:/clf/1 --json > '$WORK/v1.json'"
check "the architecture is the config's model section" test "$(json "$WORK/v1.json" "j['architecture']['name'], j['architecture']['width']")" = "r2plus1d 4"
check "the author and message are recorded" test "$(json "$WORK/v1.json" "j['author'], j['message']")" = "ada from release 0.1.0"
check "the config is kept whole" bash -c "json() { python3 -c \"import json,sys; print(json.load(open(sys.argv[1]))['config'], end='')\" \"\$1\"; }; json '$WORK/v1.json' | cmp -s - '$CKPT/step-0000000004/config.yaml'"

# Export is bit-exact: the same safetensors file the checkpoint holds.
check "export" "$REEL" models export models:/clf/1 "$WORK/export"
check "exported weights are the checkpoint's, bit for bit" cmp -s "$WORK/export/model.safetensors" "$CKPT/step-0000000004/model.safetensors"
check "exported config" cmp -s "$WORK/export/config.yaml" "$CKPT/step-0000000004/config.yaml"
"$REEL" models export models:/clf/1 "$WORK/export" 2> "$WORK/err"; code=$?
check "a second export into the same folder is refused" test "$code" -ne 0
check "and says why" grep -q "already holds an export" "$WORK/err"

# A fine-tune: one tensor changed by 1%, registered from a file with the exported config.
python3 - "$WORK/export/model.safetensors" "$WORK/tuned.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
name = "fc.weight"
b, e = header[name]["data_offsets"]
values = struct.unpack("<%df" % ((e - b) // 4), body[b:e])
body[b:e] = struct.pack("<%df" % len(values), *[v * 1.01 for v in values])
open(sys.argv[2], "wb").write(data[:8 + n] + bytes(body))
PY
check "register a fine-tune from a safetensors file" bash -c "'$REEL' models register clf '$WORK/tuned.safetensors' --config '$WORK/export/config.yaml' --parent models:/clf/1 -m tuned --tag stage=candidate > '$WORK/out'"
check "only the changed tensor was stored" grep -q "(1 of 128 chunks, 1 as deltas)" "$WORK/out"
check "diff" bash -c "'$REEL' models diff models:/clf/1 models:/clf/2 > '$WORK/diff'"
check "diff names the changed tensor" grep -Eq "changed +fc.weight +relative L2 0.01" "$WORK/diff"
check "diff counts the rest unchanged" grep -q "127 unchanged, 1 changed, 0 added, 0 removed" "$WORK/diff"
check "lineage" bash -c "'$REEL' models show models:/clf/2 | grep -q 'parents       models:/clf/1'"

# Aliases and branches.
check "alias set" "$REEL" models alias set clf production 2 --protect
check "the alias resolves" bash -c "'$REEL' models show models:/clf@production --json | grep -q '\"version\": 2'"
check "alias ls shows the audit trail" bash -c "'$REEL' models alias ls clf | grep -Eq 'ada +production +- -> 2'"
check "branch create" "$REEL" models branch create clf exp --from models:/clf/1
check "register on the branch" bash -c "'$REEL' models register clf '$CKPT' --branch exp > /dev/null"
check "log of the branch" bash -c "'$REEL' models log clf/exp | grep -c models:/clf/ | grep -qx 2"
check "main did not move" bash -c "'$REEL' models show models:/clf --json | grep -q '\"version\": 2'"
check "ls lists versions with aliases" bash -c "'$REEL' models ls clf | grep -Eq '^ +2 +main .*@production tuned'"

check "--skip-unchanged reuses an identical head" bash -c "'$REEL' models register clf '$CKPT' --branch exp --skip-unchanged --alias latest-exp | grep -q 'unchanged: models:/clf/3'"
check "--alias points at it" bash -c "'$REEL' models show models:/clf@latest-exp --json | grep -q '\"version\": 3'"
check "alias rm" "$REEL" models alias rm clf latest-exp

# Merge and rebase: models:/clf/3 holds the release's weights again, with no parent.
"$REEL" models merge models:/clf/2 models:/clf/3 2> "$WORK/err"; code=$?
check "a merge with a conflict and no strategy exits 6" test "$code" -eq 6
check "naming the tensor" grep -q "fc.weight" "$WORK/err"
check "merge --strategy average" bash -c "'$REEL' models merge models:/clf/2 models:/clf/3 --strategy average > '$WORK/out'"
check "it registers a version on ours' branch" grep -q "registered models:/clf/4 on branch main" "$WORK/out"
check "with both parents" bash -c "'$REEL' models show models:/clf/4 | grep -q 'parents       models:/clf/2, models:/clf/3'"
check "and its recipe" bash -c "'$REEL' models show models:/clf/4 --json | python3 -c \"import json,sys; r=json.load(sys.stdin)['recipe']; assert r['op']=='merge' and r['strategy']=='average' and r['conflicts']==1, r\""
check "rebase" bash -c "'$REEL' models rebase models:/clf/2 --onto models:/clf/3 --from models:/clf/1 > '$WORK/out'"
check "replaying the tip's change onto an equal base stores nothing new" grep -q "stored 0 B new" "$WORK/out"
check "recorded as a rebase" bash -c "'$REEL' models show models:/clf/5 --json | grep -q '\"op\": \"rebase\"'"
"$REEL" models merge models:/clf/2 models:/clf/3 --strategy mean 2> "$WORK/err"; code=$?
check "an unknown strategy exits 3" test "$code" -eq 3

# Removal refuses what is referenced.
"$REEL" models rm models:/clf/2 2> "$WORK/err"; code=$?
check "rm of a referenced version exits 6" test "$code" -eq 6
check "and names what refers to it" grep -q "alias production" "$WORK/err"
check "rm --force" "$REEL" models rm models:/clf/3 --force
check "the branch stepped back" bash -c "'$REEL' models branch ls clf | grep -Eq '^exp +1 '"

# A registry given as a relative folder (the default is ./reel-data/registry).
check "a relative registry folder" bash -c "cd '$WORK' && '$REEL' models register rel '$CKPT' --registry rel-registry > /dev/null && test -f rel-registry/registry.db"

# Bad input: clear errors, exit codes, and nothing registered.
before=$("$REEL" models ls clf --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
head -c 1000 "$WORK/tuned.safetensors" > "$WORK/truncated.safetensors"
"$REEL" models register clf "$WORK/truncated.safetensors" --config "$WORK/export/config.yaml" 2> "$WORK/err"; code=$?
check "a truncated safetensors file is refused" test "$code" -eq 1
check "naming the file" grep -q "truncated.safetensors" "$WORK/err"
"$REEL" models register ../evil "$CKPT" 2> "$WORK/err"; code=$?
check "a name with path characters exits 3" test "$code" -eq 3
"$REEL" models register clf "$WORK/tuned.safetensors" 2> "$WORK/err"; code=$?
check "a safetensors file without --config exits 3" test "$code" -eq 3
"$REEL" models register clf "$WORK/export/config.yaml" 2> "$WORK/err"; code=$?
check "a file that is not safetensors exits 3" test "$code" -eq 3
after=$("$REEL" models ls clf --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
check "none of them registered anything" test "$before" = "$after"
"$REEL" models show models:/nope/1 2> "$WORK/err"; code=$?
check "an unknown model exits 2" test "$code" -eq 2
check "naming it" grep -q "no registered model 'nope'" "$WORK/err"
"$REEL" models show models:/clf@staging 2> /dev/null; code=$?
check "an unknown alias exits 2" test "$code" -eq 2
"$REEL" models show clf/1 2> "$WORK/err"; code=$?
check "a malformed URI exits 3" test "$code" -eq 3
"$REEL" models ls --registry "postgresql://nowhere.invalid/x" 2> "$WORK/err"; code=$?
check "a PostgreSQL registry without --chunks exits 3" test "$code" -eq 3
finish
