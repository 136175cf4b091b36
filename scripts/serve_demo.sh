#!/usr/bin/env bash
# The main job's last step: starts `reel serve` on a registered model, classifies a few
# validation videos through the KServe v2 HTTP API (by path, the 'uri' input; curl is the
# client), prints each answer beside the true class, and stops the server (SIGTERM, exit 0).
# Usage: scripts/serve_demo.sh REEL RAW_DIR MODEL_URI [VIDEOS (default 4)]
#   RAW_DIR: a UCF101-layout folder with testlist01.txt (what `reel datagen` writes)
set -euo pipefail
REEL=$1
RAW=$(cd "$2" && pwd)
MODEL_URI=$3
COUNT=${4:-4}
LOG=$(mktemp -d)
"$REEL" serve "$MODEL_URI" --port 0 --allow-uri-prefix "$RAW" > "$LOG/out" 2> "$LOG/err" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$LOG"' EXIT
url=""
for _ in $(seq 1200); do  # loading the model takes seconds; give up after 2 minutes
  url=$(sed -n 's/^listening on //p' "$LOG/out")
  [ -n "$url" ] && break
  kill -0 "$pid" 2> /dev/null || { cat "$LOG/err" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "serve_demo: reel serve did not start" >&2; exit 1; }
name=$(sed -n 's/^model \([^ ]*\) version.*/\1/p' "$LOG/err" | head -n 1)
echo "reel serve: $url, model $name ($(sed -n 2p "$LOG/out"))"
# Spread the picks over the list: every class appears in it in turn.
total=$(grep -c . "$RAW/testlist01.txt")
step=$(( total / COUNT > 0 ? total / COUNT : 1 ))
for video in $(awk -v step="$step" -v n="$COUNT" 'NF && (NR - 1) % step == 0 && ++k <= n {print $1}' "$RAW/testlist01.txt"); do
  request="{\"inputs\":[{\"name\":\"uri\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"$RAW/$video\"]}],\
\"outputs\":[{\"name\":\"probabilities\",\"parameters\":{\"classification\":1}}]}"
  answer=$(curl -s -d "$request" "$url/v2/models/$name/infer")
  top=$(echo "$answer" | sed -n 's/.*"data":\["\([^"]*\)".*/\1/p')  # score:index:label
  [ -n "$top" ] || { echo "serve_demo: $video: $answer" >&2; exit 1; }
  printf '  %-44s true %-24s served %s (p=%s)\n' "$video" "${video%%/*}" "${top##*:}" "${top%%:*}"
done
kill -TERM "$pid"
wait "$pid"
echo "reel serve stopped"
