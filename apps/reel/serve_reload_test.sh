#!/usr/bin/env bash
# `reel serve` following a registry alias under load: while wrk sends requests, the alias moves
# to a new version, which is loaded, swapped in, and the old one drained and unloaded, with no
# failed request. Then a canary: a share of the requests, by request id, to a second version,
# with metrics per version.
# Usage: serve_reload_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"
export REEL_REGISTRY_URI="$WORK/registry"

served_versions() { curl -sf "$URL/v2/models/tiny" | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["versions"]))'; }
export -f served_versions

wrk_body
check "register version 1" bash -c "'$REEL' models register tiny '$CKPT' > /dev/null"
check "register version 2" bash -c "'$REEL' models register tiny '$CKPT' -m 'the same weights again' > /dev/null"
check "production -> 1" "$REEL" models alias set tiny production 1

# --- the alias moves under load ---------------------------------------------------------------
start_server follow models:/tiny@production --poll-interval 0.1
check "serving models:/tiny@production" test -n "$URL"
check "it says it follows the alias" grep -q "following models:/tiny@production" "$WORK/follow.err"
export URL
check "version 1 serves" bash -c "[ \"\$(served_versions)\" = 1 ]"
wrk -t1 -c4 -d300s -s "$WORK/post.lua" --latency "$URL/v2/models/tiny/infer" > "$WORK/wrk.out" 2>&1 &
WRK=$!
PIDS+=("$WRK")
wait_for "wrk's first answers" bash -c \
  "curl -sf '$URL/metrics' | grep -q 'nv_inference_request_success{model=\"tiny\",version=\"1\"} [1-9]'"
check "production -> 2 while wrk runs" "$REEL" models alias set tiny production 2
check "the server swaps to version 2 and unloads version 1" wait_for "the swap" \
  bash -c "[ \"\$(served_versions)\" = 2 ]"
check "... before the load ends" kill -0 "$WRK"
check "version 2 answers under load" wait_for "version 2's answers" bash -c \
  "curl -sf '$URL/metrics' | grep -q 'nv_inference_request_success{model=\"tiny\",version=\"2\"} [1-9]'"
kill -INT "$WRK"  # wrk stops and prints its figures
wait "$WRK"
cat "$WORK/wrk.out"
check "wrk: requests were answered" grep -Eq '^ +[0-9]+ requests in' "$WORK/wrk.out"
check "wrk: no failed request (no non-2xx answers)" bash -c "! grep -q 'Non-2xx' '$WORK/wrk.out'"
check "wrk: no socket errors" bash -c "! grep -q 'Socket errors' '$WORK/wrk.out'"
check "the log names the swap" grep -q "tiny now serves version 2 of models:/tiny@production (was 1)" "$WORK/follow.err"
kill -TERM "$PID"; wait "$PID"; check "SIGTERM: exits 0" test $? -eq 0

# --- a canary by request id -------------------------------------------------------------------
check "candidate -> 1" "$REEL" models alias set tiny candidate 1
start_server canary models:/tiny@production --canary models:/tiny@candidate --canary-percent 50
check "serving with a canary" test -n "$URL"
check "metadata names the canary" bash -c \
  "curl -sf '$URL/v2/models/tiny' | grep -q '\"canary\":{\"percent\":50,\"version\":\"1\"}'"
python3 - "$URL" "$WORK/body.json" > "$WORK/canary.out" <<'PY'
import json, sys, urllib.request
url, body = sys.argv[1], json.load(open(sys.argv[2]))
def version(rid):
    body["id"] = rid
    req = urllib.request.Request(url + "/v2/models/tiny/infer", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["model_version"]
first = {f"user-{i}": version(f"user-{i}") for i in range(40)}
again = {rid: version(rid) for rid in first}
print(sum(v == "1" for v in first.values()), sum(v == "2" for v in first.values()),
      "same" if first == again else "changed")
PY
read -r CANARY PRIMARY SAME < "$WORK/canary.out"
echo "canary answered $CANARY of 40 ids, the primary $PRIMARY ($SAME on a second round)"
check "both versions take a share" bash -c "[ '$CANARY' -ge 8 ] && [ '$PRIMARY' -ge 8 ]"
check "an id always reaches the same version" test "$SAME" = same
check "metrics per version" bash -c \
  "curl -sf '$URL/metrics' | grep -qx 'nv_inference_request_success{model=\"tiny\",version=\"1\"} $((2 * CANARY))'"
kill -TERM "$PID"; wait "$PID"; check "SIGTERM: exits 0" test $? -eq 0

check "a canary of a model not served: exit 2" bash -c \
  "'$REEL' serve models:/tiny@production --canary other=models:/tiny@candidate --port 0 > /dev/null 2>&1; [ \$? -eq 2 ]"
finish
