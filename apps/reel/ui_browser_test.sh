#!/usr/bin/env bash
# `reel ui` in a real browser: a real training run, a dataset, a registry with a merge and two
# users, a failed pipeline and a `reel serve` under requests, then headless Chromium
# (ui/test/console_test.mjs, playwright-core) opens every page and checks what it shows against
# the files; plus 100 runs of 10,000 points each for load times. Screenshots go to
# $REEL_UI_SHOTS when set (docs/screenshots is made that way), else into the scratch folder.
# Usage: ui_browser_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
export REEL
source "$(dirname "$0")/check_lib.sh"
source "$(dirname "$0")/serve_lib.sh"

CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ] || [ ! -d "$SRC/ui/node_modules/playwright-core" ]; then
  echo "skipped: needs Debian's chromium and ui/node_modules (scripts/setup.sh --tests)"
  exit 77
fi

# --- a real run, its dataset, and the registry --------------------------------------------------
tiny_dataset
tiny_config run "{max_steps: 24, log_every: 2, eval_every_epochs: 1}" "{every_steps: 12, keep: 2}"
check "a training run" bash -c "'$REEL' train --config '$WORK/run.yaml' --quiet > /dev/null 2>&1"
mkdir -p "$WORK/runs/real" "$WORK/data"
mv "$WORK/run" "$WORK/runs/real/tiny"
mv "$WORK/ds" "$WORK/data/ds"
export REEL_REGISTRY_URI="$WORK/registry"
CKPT="$WORK/runs/real/tiny/checkpoints"
check "register v1" bash -c "'$REEL' models register clf '$CKPT' -m first > /dev/null"
check "export it" bash -c "'$REEL' models export models:/clf/1 '$WORK/export' > /dev/null"
check "a fine-tune as v2" python3 - "$WORK/export" <<'PY'
import json, struct, sys, random
# The exported weights with the head moved a little: a fine-tune of v1's head.
path = sys.argv[1] + "/model.safetensors"
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
body = bytearray(raw[8 + n:])
rng = random.Random(3)
for name, t in header.items():
    if name.startswith("fc.") and t["dtype"] == "F32":
        a, b = t["data_offsets"]
        vals = list(struct.unpack("<%df" % ((b - a) // 4), body[a:b]))
        body[a:b] = struct.pack("<%df" % len(vals), *[v * (1 + 0.1 * rng.uniform(-1, 1)) for v in vals])
open(sys.argv[1] + "/tuned.safetensors", "wb").write(raw[:8 + n] + bytes(body))
PY
check "register v2 with v1 as parent" bash -c "'$REEL' models register clf '$WORK/export/tuned.safetensors' --config '$WORK/export/config.yaml' --parent models:/clf/1 -m tuned > /dev/null"
check "merge v1 and v2 as v3" bash -c "'$REEL' models merge models:/clf/1 models:/clf/2 --strategy average > /dev/null"
check "production -> v1" bash -c "'$REEL' models alias set clf production 1 > /dev/null"
WRITER=$("$REEL" registry user add wes 2>/dev/null)
READER=$("$REEL" registry user add rita 2>/dev/null)
check "grants" bash -c "'$REEL' registry grant wes '*' writer > /dev/null && '$REEL' registry grant rita '*' reader > /dev/null"

# --- a pipeline whose second task fails ----------------------------------------------------------
cat > "$WORK/demo.yaml" <<'YAML'
name: demo
tasks:
  - name: prepare
    command: [bash, -c, 'echo preparing']
  - name: build
    command: [bash, -c, 'echo "the build step broke on purpose" >&2; exit 3']
    depends_on: [prepare]
  - name: publish
    command: [bash, -c, 'echo never']
    depends_on: [build]
YAML
(cd "$WORK" && "$REEL" pipeline --state "$WORK/pipelines" run demo.yaml > "$WORK/pipeline.out" 2>&1)
check "the pipeline failed as meant" grep -q "build" "$WORK/pipeline.out"

# --- a server under a few requests ---------------------------------------------------------------
start_server serve clf=models:/clf/1
check "reel serve came up" test -n "$URL"
wrk_body
for _ in 1 2 3 4 5 6; do
  curl -s -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary "@$WORK/body.json" "$URL/v2/models/clf/infer"
done

# --- the scheduler daemon with a job running and one waiting ------------------------------------
cat > "$WORK/cluster.yaml" <<'YAML'
nodes:
  - {name: node-a, cpu: 2, memory: 4Gi}
queues:
  - {name: default, quota: {cpu: 2, memory: 4Gi}}
YAML
"$REEL" scheduler serve --state "$WORK/scheduler" --cluster "$WORK/cluster.yaml" --port 0 --grace 1s \
  > "$WORK/daemon.out" 2> "$WORK/daemon.err" &
PIDS+=($!)
wait_for "the scheduler" grep -q "^listening on" "$WORK/daemon.out"
SCHED=$(sed -n 's/^listening on //p' "$WORK/daemon.out")
trap '{ for p in "${PIDS[@]}"; do kill -9 "$p"; done; pkill -9 -f "jobs shim $WORK"; wait; } 2> /dev/null
      rm -rf "$WORK"' EXIT
RUNNING_JOB=$(cd "$WORK" && "$REEL" jobs --scheduler "$SCHED" submit --name running --cpu 2 -- sleep 120)
WAITING_JOB=$(cd "$WORK" && "$REEL" jobs --scheduler "$SCHED" submit --name waiting --cpu 2 -- sleep 120)
check "two jobs submitted" test -n "$RUNNING_JOB" -a -n "$WAITING_JOB"

# --- 100 runs of 10,000 points --------------------------------------------------------------------
python3 - "$WORK/runs/scale" <<'PY'
import json, math, os, sys
for r in range(100):
    d = os.path.join(sys.argv[1], "%03d" % r)
    os.makedirs(d)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for s in range(1, 10001):
            f.write(json.dumps({"step": s, "epoch": s // 1000, "loss": 2.0 * math.exp(-s / 3000) + 0.01 * math.sin(s + r),
                                "lr": 0.1, "clips_per_s": 40 + r % 7, "input_wait_share": 0.02, "time": 1.7e9 + s}) + "\n")
PY

# --- a run still training: a line every 0.3 s, as `reel train` appends them --------------------------
mkdir -p "$WORK/runs/live/now"
(step=0; while :; do
  step=$((step + 1))
  printf '{"step":%d,"epoch":0,"loss":%s,"lr":0.1,"clips_per_s":30,"input_wait_share":0.01,"time":%s}\n' \
    "$step" "$(awk "BEGIN {print 2.5 / (1 + $step / 50)}")" "$(date +%s.%N)" >> "$WORK/runs/live/now/metrics.jsonl"
  sleep 0.3
done) &
PIDS+=($!)

# --- what the pages must show, from the files -----------------------------------------------------
SERVE_URL=$URL
start_listening ui "$REEL" ui --port 0 --runs "$WORK/runs" --datasets "$WORK/data" \
  --pipelines "$WORK/pipelines" --serve "$SERVE_URL" --scheduler "$SCHED" --scrape-ms 200
UI=$URL UI_PID=$PID
URL=$SERVE_URL
check "reel ui came up" test -n "$UI"
export RUNNING_JOB WAITING_JOB
check "the expectations" python3 - "$WORK" "$WRITER" "$READER" "$URL" <<'PY'
import json, os, subprocess, sys
work, writer, reader, serve = sys.argv[1:5]
def run(name):
    lines = [json.loads(l) for l in open(os.path.join(work, "runs", name, "metrics.jsonl"))]
    steps = [l for l in lines if "event" not in l]
    evals = [l for l in lines if l.get("event") in ("eval", "final_eval")]
    return steps, evals
steps, evals = run("real/tiny")
runs = [{"name": "real/tiny", "last_step": steps[-1]["step"], "loss": round(steps[-1]["loss"], 4),
         "top1": round(evals[-1]["top1"], 4), "points": len(steps)}]
s2, _ = run("scale/042")
runs.append({"name": "scale/042", "last_step": s2[-1]["step"], "loss": round(s2[-1]["loss"], 4), "points": len(s2)})
reel = os.environ.get("REEL")
show = lambda uri: json.loads(subprocess.check_output([reel, "models", "show", uri, "--json"]))
versions = [show("models:/clf/%d" % v) for v in (1, 2, 3)]
edges = [[p, v["uri"]] for v in versions for p in v["parents"]]
manifest = json.load(open(os.path.join(work, "data", "ds", "manifest.json")))
expect = {
    "token_writer": writer, "token_reader": reader, "runs": runs, "run": "real/tiny",
    "eval": {"top1": round(evals[-1]["top1"], 4), "class_names": evals[-1]["class_names"],
             "confusion": evals[-1]["confusion"]},
    "scale": {"prefix": "scale/", "runs": 100, "points": 10000},
    "model": "clf", "versions": [1, 2, 3], "alias": {"name": "production", "from": 1, "to": 2},
    "lineage": {"nodes": [v["uri"] for v in versions], "edges": edges},
    "pipeline": {"id": "demo-1", "tasks": {"prepare": "succeeded", "build": "failed", "publish": "skipped"},
                 "failed_task": "build", "log_contains": "the build step broke on purpose"},
    "dataset": {"name": manifest["name"], "class_counts": {k: v["class_counts"] for k, v in manifest["splits"].items()}},
    "serving": {"model": "clf"},
    "live": {"run": "live/now"},
    "jobs": {"states": {os.environ["RUNNING_JOB"]: "running", os.environ["WAITING_JOB"]: "pending"},
             "queue": "default", "queue_cpu": "cpu 2 / 2"},
}
diff = json.loads(subprocess.check_output([reel, "models", "diff", "models:/clf/1", "models:/clf/2", "--json"]))
expect["diff"] = {"a": "models:/clf/1", "b": "models:/clf/2",
                  "changed": sum(1 for t in diff["tensors"] if t["change"] == "changed")}
json.dump(expect, open(os.path.join(work, "expect.json"), "w"), indent=1)
PY

# Requests keep coming while the pages are open, so the serving page has rates to show.
(while :; do
  curl -s -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary "@$WORK/body.json" "$URL/v2/models/clf/infer"
  sleep 0.1
done) &
PIDS+=($!)

check "a class's preview is an animated PNG of the clip's frames" bash -c "
  curl -sf -H 'Authorization: Bearer $READER' '$UI/ui/api/datasets/0/preview/3' -o '$WORK/preview.png' &&
  ffprobe -v error -count_frames -show_entries stream=codec_name,nb_read_frames -of csv=p=0 '$WORK/preview.png' | grep -qx 'apng,8'"
preview_status() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $READER" "$UI/ui/api/datasets/0/preview/$1"; }
check "the third clip of a class is another clip" bash -c "
  curl -sf -H 'Authorization: Bearer $READER' '$UI/ui/api/datasets/0/preview/3?clip=2' -o '$WORK/preview3.png' &&
  ! cmp -s '$WORK/preview.png' '$WORK/preview3.png'"
check "past a class's last clip is 404, a bad clip number 400, an unknown class 404" \
  test "$(preview_status '3?clip=6') $(preview_status '3?clip=x') $(preview_status 8)" = "404 400 404"

SHOTS=${REEL_UI_SHOTS:-$WORK/shots}
mkdir -p "$SHOTS"
check "the console in Chromium" env REEL_UI_URL="$UI" REEL_UI_EXPECT="$WORK/expect.json" \
  REEL_UI_SHOTS="$SHOTS" CHROMIUM="$CHROMIUM" node "$SRC/ui/test/console_test.mjs"
check "a screenshot of each main page" bash -c "ls '$SHOTS'/runs.png '$SHOTS'/run.png '$SHOTS'/model.png '$SHOTS'/pipeline.png '$SHOTS'/serving.png > /dev/null"
check "the alias the page moved is in the registry" bash -c \
  "'$REEL' models show models:/clf@production --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"version\"] == 2'"

# The console's actions, as the page's buttons send them: a reader may not, a writer may.
post() { curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $1" "$UI$2"; }
check "a reader may not cancel a job (403)" test "$(post "$READER" /ui/api/jobs/$WAITING_JOB/cancel)" = 403
check "a writer cancels the waiting job through the console" test "$(post "$WRITER" /ui/api/jobs/$WAITING_JOB/cancel)" = 200
check "and the scheduler has it cancelled" bash -c \
  "'$REEL' jobs --scheduler '$SCHED' status $WAITING_JOB --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"state\"] == \"cancelled\"'"
check "a writer retries the failed pipeline through the console" test "$(post "$WRITER" /ui/api/pipelines/demo-1/retry)" = 200
# A retry runs the task again (another header in its log) and ends as the run did: failed.
retried() {
  [ "$(grep -c 'task build attempt' "$WORK/pipelines/logs/demo-1/build.log")" -ge 2 ] &&
    "$REEL" pipeline --state "$WORK/pipelines" status demo-1 --json |
    python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["state"] != "failed")'
}
check "the retry ran the failed task again (and it failed again)" wait_for "the retry" retried

kill -TERM "$UI_PID"
wait "$UI_PID"
check "reel ui stops on SIGTERM with exit 0" test $? -eq 0
finish
