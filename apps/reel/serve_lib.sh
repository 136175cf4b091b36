# Shared by the `reel serve` test scripts (sourced after check_lib.sh, with $REEL and $WORK set):
# servers started in the background and killed on exit, polling with a deadline, and a small
# FP32 request with wrk's script to send it.
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

# start_server LABEL SERVE_ARGS...: `reel serve ... --port 0` in the background; sets PID and
# URL, the address its first line names (empty when it did not come up within 60 s).
start_server() {
  local label=$1; shift
  start_listening "$label" "$REEL" serve "$@" --port 0
}

# start_listening LABEL COMMAND...: any Reel server that prints "listening on URL" first (reel
# serve, reel ui), in the background; sets PID and URL as start_server does.
start_listening() {
  local label=$1; shift
  "$@" > "$WORK/$label.out" 2> "$WORK/$label.err" &
  PID=$!
  PIDS+=("$PID")
  URL=""
  for _ in $(seq 600); do
    URL=$(sed -n 's/^listening on //p' "$WORK/$label.out")
    [ -n "$URL" ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$WORK/$label.err"
}

# wait_for DESCRIPTION COMMAND...: polls COMMAND every 0.1 s for up to 60 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
  echo "timed out waiting for $what"
  return 1
}

# wrk_body: $WORK/body.json, one FP32 sample [1,3,4,24,24] (the test checkpoint's shape), and
# $WORK/post.lua, wrk's script that POSTs it.
wrk_body() {
  python3 - > "$WORK/body.json" <<'PY'
import json
n = 3 * 4 * 24 * 24
print(json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 4, 24, 24],
                              "data": [((i * 37) % 101) / 50.0 - 1 for i in range(n)]}]}))
PY
  cat > "$WORK/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$WORK/body.json", "rb")
wrk.body = f:read("*a")
f:close()
LUA
}
