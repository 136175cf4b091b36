#!/usr/bin/env bash
# End-to-end checks of `reel registry serve` and of `reel models` against it, run by ctest: users
# and tokens, roles, a bit-exact export through the server, garbage collection, a clean stop on
# SIGTERM; and a push killed with SIGKILL halfway, which leaves no version and whose rerun reuses
# the chunks already stored.
# Usage: registry_server_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"
SERVED="$WORK/served"
unset REEL_REGISTRY_URI REEL_REGISTRY_TOKEN

# Users are made on the server's own registry folder; a token is printed once.
ADA=$("$REEL" registry user add ada --admin --registry "$SERVED" 2> /dev/null)
check "user add prints a token" grep -q '^reel_' <<< "$ADA"
RUI=$("$REEL" registry user add rui --registry "$SERVED" 2> /dev/null)
check "grant" "$REEL" registry grant rui clf reader --registry "$SERVED"
check "user ls shows roles, not tokens" bash -c "'$REEL' registry user ls --registry '$SERVED' | grep -Eq '^rui +clf:reader' && ! '$REEL' registry user ls --registry '$SERVED' | grep -q reel_"
"$REEL" registry grant rui clf owner --registry "$SERVED" 2> "$WORK/err"; code=$?
check "an unknown role exits 3" test "$code" -eq 3

# The server's first line is its address; the read waits for it (no polling).
exec 3< <(exec "$REEL" registry serve --registry "$SERVED" --port 0 2> "$WORK/serve.err")
SERVER_PID=$!
read -r first <&3
URL=${first#listening on }
check "serve prints where it listens" grep -Eq '^http://127\.0\.0\.1:[0-9]+$' <<< "$URL"

as() { # as TOKEN reel-args...: `reel` against the server with that token
  local token=$1; shift
  REEL_REGISTRY_URI="$URL" REEL_REGISTRY_TOKEN="$token" "$REEL" "$@"
}
check "register through the server" bash -c "REEL_REGISTRY_URI='$URL' REEL_REGISTRY_TOKEN='$ADA' '$REEL' models register clf '$CKPT' -m first > '$WORK/out'"
check "it says what it stored" grep -q "registered models:/clf/1 on branch main: 128 tensors" "$WORK/out"
check "the author is the token's holder" bash -c "REEL_REGISTRY_URI='$URL' REEL_REGISTRY_TOKEN='$ADA' '$REEL' models show models:/clf/1 --json | grep -q '\"author\": \"ada\"'"
check "export through the server" as "$ADA" models export models:/clf/1 "$WORK/export"
check "is bit-exact" cmp -s "$WORK/export/model.safetensors" "$CKPT/step-0000000004/model.safetensors"
check "alias set --protect" as "$ADA" models alias set clf production 1 --protect
check "a reader reads" bash -c "REEL_REGISTRY_URI='$URL' REEL_REGISTRY_TOKEN='$RUI' '$REEL' models show models:/clf@production --json | grep -q '\"version\": 1'"
as "$RUI" models register clf "$CKPT" 2> "$WORK/err"; code=$?
check "a reader may not register (exit 4)" test "$code" -eq 4
check "and is told why" grep -q "'rui' is reader of model 'clf'" "$WORK/err"
as "" models ls 2> "$WORK/err"; code=$?
check "no token: exit 4" test "$code" -eq 4
check "unauthenticated" grep -q "unauthenticated" "$WORK/err"
check "the same folder serves a local reader too" bash -c "'$REEL' models ls clf --registry '$SERVED' | grep -q production"
check "rm --force through the server" as "$ADA" models rm models:/clf/1 --force
check "gc through the server removes its chunks" bash -c "REEL_REGISTRY_URI='$URL' REEL_REGISTRY_TOKEN='$ADA' '$REEL' models gc --grace 0 | grep -q '^removed 105 unreferenced chunks'"
as "$RUI" models gc 2> "$WORK/err"; code=$?
check "only a registry admin collects (exit 4)" test "$code" -eq 4
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"; code=$?
check "SIGTERM stops the server cleanly" test "$code" -eq 0
check "saying so" grep -q "SIGTERM, stopping" "$WORK/serve.err"
exec 3<&-
"$REEL" registry serve --registry "$WORK/served" --port 99999 2> "$WORK/err"; code=$?
check "a bad port exits 3" test "$code" -eq 3

# kill -9 halfway through a push: the process dies right after storing its 40th chunk (of the
# checkpoint's 105 distinct ones). A push makes its chunks durable 64 at a time (a group shares
# its fsyncs), so the first 64 are all stored by then, and none of the rest.
stored_chunks() { ls "$1" | grep -cE '^[0-9a-f]{64}$'; }  # not a writer's temp file
LOCAL="$WORK/local"
REEL_CRASH_AT=WeightStore::Push:ChunkStored:40 "$REEL" models register clf "$CKPT" --registry "$LOCAL" > /dev/null 2>&1; code=$?
check "the push was killed by SIGKILL" test "$code" -eq 137
left=$(stored_chunks "$LOCAL/weights/chunks")
check "leaving the 64 chunks of the first group" test "$left" -eq 64
check "and no version" bash -c "'$REEL' models ls --registry '$LOCAL' --json | python3 -c 'import json,sys; assert json.load(sys.stdin) == []'"
check "the rerun registers" bash -c "'$REEL' models register clf '$CKPT' --registry '$LOCAL' > '$WORK/out'"
check "writing only the $((105 - left)) chunks the killed push had not" grep -q "($((105 - left)) of 128 chunks" "$WORK/out"
check "and pulls bit-exact" bash -c "'$REEL' models export models:/clf/1 '$WORK/export2' --registry '$LOCAL' && cmp -s '$WORK/export2/model.safetensors' '$CKPT/step-0000000004/model.safetensors'"

# The same through a server: the server dies by SIGKILL after storing 40 chunks (so 64);
# restarted, it is sent only the 41 it lacks.
serve_crashing_at() { # serve_crashing_at POINT: a --no-auth server on $WORK/served2 as fd 4
  exec 4< <(REEL_CRASH_AT="$1" exec "$REEL" registry serve --no-auth --registry "$WORK/served2" --port 0 2>> "$WORK/serve2.err")
  SERVER_PID=$!
  read -r first <&4
  URL=${first#listening on }
}
serve_crashing_at WeightStore::Push:ChunkStored:40
REEL_REGISTRY_URI="$URL" "$REEL" models register clf "$CKPT" > /dev/null 2>&1; code=$?
check "a push whose server dies fails" test "$code" -ne 0
wait "$SERVER_PID"; code=$?
check "the server was killed by SIGKILL" test "$code" -eq 137
exec 4<&-
left=$(stored_chunks "$WORK/served2/weights/chunks")
check "having stored the 64 chunks of the first group" test "$left" -eq 64
serve_crashing_at ""
check "the rerun through the restarted server registers" bash -c "REEL_REGISTRY_URI='$URL' '$REEL' models register clf '$CKPT' > '$WORK/out'"
check "sending only the $((105 - left)) chunks the server lacked" grep -q "($((105 - left)) of 128 chunks, .*; sent $((105 - left)) chunks" "$WORK/out"
check "and pulls bit-exact through it" bash -c "REEL_REGISTRY_URI='$URL' '$REEL' models export models:/clf/1 '$WORK/export3' && cmp -s '$WORK/export3/model.safetensors' '$CKPT/step-0000000004/model.safetensors'"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
exec 4<&-

REEL_CRASH_AT=nonsense "$REEL" models ls --registry "$LOCAL" 2> /dev/null; code=$?
check "a malformed REEL_CRASH_AT exits 3" test "$code" -eq 3
finish
