#!/usr/bin/env bash
# `reel serve` end to end on loopback: a checkpoint of the previous release, the same weights
# through the registry (models:/), a TorchScript file saved by Python PyTorch (its answers must
# equal PyTorch's), bearer tokens, bad requests, bad command lines, and SIGTERM.
# Usage: serve_cli_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$(dirname "$0")/check_lib.sh"
source "$(dirname "$0")/serve_lib.sh"
CKPT="$SRC/testdata/checkpoints/release-0.1.0"
export REEL_REGISTRY_URI="$WORK/registry"

# infer URL MODEL SHAPE [CURL_ARGS...]: POSTs one UINT8 clip of SHAPE (ramp pixels) as JSON,
# prints the HTTP status then the body.
infer() {
  local url=$1 model=$2 shape=$3; shift 3
  python3 - "$shape" > "$WORK/body.json" <<'PY'
import json, math, sys
shape = [int(x) for x in sys.argv[1].split(",")]
n = math.prod(shape)
print(json.dumps({"id": "t1", "inputs": [{"name": "input", "datatype": "UINT8", "shape": shape,
                                         "data": [i % 256 for i in range(n)]}]}))
PY
  curl -s -o "$WORK/answer.json" -w "%{http_code}\n" "$@" -H 'Content-Type: application/json' \
    --data-binary @"$WORK/body.json" "$url/v2/models/$model/infer"
  cat "$WORK/answer.json"
}

# infer_videos URL MODEL FILE...: POSTs the files as one BYTES input (the binary extension) and
# asks for the top 3 labels; prints the HTTP status then the JSON part of the answer.
infer_videos() {
  local url=$1 model=$2; shift 2
  python3 - "$WORK/videos.bin" "$@" > "$WORK/videos.json_length" <<'PY'
import json, struct, sys
blob = b"".join(struct.pack("<I", len(d)) + d for d in (open(f, "rb").read() for f in sys.argv[2:]))
head = json.dumps({"inputs": [{"name": "input", "datatype": "BYTES", "shape": [len(sys.argv) - 2],
                               "parameters": {"binary_data_size": len(blob)}}],
                   "outputs": [{"name": "probabilities", "parameters": {"classification": 3}}]}).encode()
open(sys.argv[1], "wb").write(head + blob)
print(len(head))
PY
  curl -s -o "$WORK/answer.bin" -w "%{http_code}\n" -H "Inference-Header-Content-Length: $(cat "$WORK/videos.json_length")" \
    -H 'Content-Type: application/octet-stream' --data-binary @"$WORK/videos.bin" "$url/v2/models/$model/infer"
  cat "$WORK/answer.bin"
}
export -f infer infer_videos
export WORK

stop_server() {  # SIGTERM, and the exit code must be 0
  kill -TERM "$PID" && wait "$PID"
}

# --- a checkpoint folder -------------------------------------------------------------------
start_server ckpt tiny="$CKPT"
check "serve a checkpoint: listening on its first line" test -n "$URL"
check "health: live" bash -c "curl -sf '$URL/v2/health/live'"
check "health: ready" bash -c "curl -sf '$URL/v2/health/ready'"
check "model metadata names its input shape" bash -c \
  "curl -sf '$URL/v2/models/tiny' | grep -q '\"shape\":\[-1,3,4,24,24\]'"
check "the start-up line says how the cores are used" grep -q "OMP_WAIT_POLICY=PASSIVE" "$WORK/ckpt.out"
infer "$URL" tiny 1,3,4,24,24 > "$WORK/ckpt.answer"
check "infer: 200 with 8 logits and probabilities" python3 - "$WORK/ckpt.answer" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n", 1)
assert lines[0] == "200", lines
answer = json.loads(lines[1])
out = {o["name"]: o for o in answer["outputs"]}
assert answer["id"] == "t1" and answer["model_name"] == "tiny"
assert out["logits"]["shape"] == [1, 8] and len(out["logits"]["data"]) == 8
assert abs(sum(out["probabilities"]["data"]) - 1) < 1e-5
PY
check "unknown model: 404" bash -c "infer '$URL' nope 1,3,4,24,24 | head -1 | grep -qx 404"
check "wrong shape: 400 naming the shape" bash -c \
  "infer '$URL' tiny 1,3,4,24,23 | tr -d '\n' | grep -q '^400.*takes \[B,3,4,24,24\]'"
check "malformed JSON: 400" bash -c "curl -s -o /dev/null -w '%{http_code}' -d '{' '$URL/v2/models/tiny/infer' | grep -qx 400"
check "metrics count the request" bash -c \
  "curl -sf '$URL/metrics' | grep -qx 'nv_inference_request_success{model=\"tiny\",version=\"1\"} 1'"
VIDEOS="$SRC/testdata/videos"
infer_videos "$URL" tiny "$VIDEOS/mmaction2_test.mp4" "$VIDEOS/torchcodec_testsrc2_vp9.webm" > "$WORK/videos.answer"
check "encoded videos (BYTES): decoded server-side, top 3 labels each" python3 - "$WORK/videos.answer" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().split("\n", 1)
assert lines[0] == "200", lines
answer = json.loads(lines[1])
out = answer["outputs"][0]
assert out["datatype"] == "BYTES" and out["shape"] == [2, 3], out
assert all(len(label.split(":")) == 3 for label in out["data"]), out
PY
check "a file that is not a video: 400 saying so" bash -c \
  "infer_videos '$URL' tiny '$SRC/testdata/README.md' | tr -d '\n' | grep -q '^400.*not a video the server can decode'"
check "the uri input is refused unless the server allows a prefix" bash -c \
  "curl -s -o /dev/null -w '%{http_code}' -d '{\"inputs\":[{\"name\":\"uri\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"$VIDEOS/mmaction2_test.mp4\"]}]}' '$URL/v2/models/tiny/infer' | grep -qx 403"
check "SIGTERM: exits 0" stop_server
start_server uris tiny="$CKPT" --allow-uri-prefix "$VIDEOS" --precision bf16
check "--precision bf16: the start-up line says so" grep -q "OMP_WAIT_POLICY=PASSIVE, bf16" "$WORK/uris.out"
uri_request() { echo "{\"inputs\":[{\"name\":\"uri\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"$1\"]}]}"; }
check "a video by path under the allowed prefix" bash -c \
  "curl -sf -d '$(uri_request "$VIDEOS/mmaction2_test.mp4")' '$URL/v2/models/tiny/infer' | grep -q '\"shape\":\[1,8\]'"
check "a path outside it: 403" bash -c \
  "curl -s -o /dev/null -w '%{http_code}' -d '$(uri_request "$VIDEOS/../README.md")' '$URL/v2/models/tiny/infer' | grep -qx 403"
stop_server
CKPT_ANSWER=$(tail -n +2 "$WORK/ckpt.answer")

# --- the same weights through the registry -------------------------------------------------
check "register the checkpoint" bash -c "'$REEL' models register tiny '$CKPT' > /dev/null"
check "alias it" "$REEL" models alias set tiny production 1
start_server reg models:/tiny@production
check "serve models:/tiny@production" test -n "$URL"
check "the registry's version answers as the checkpoint did" python3 - "$CKPT_ANSWER" \
  "$(infer "$URL" tiny 1,3,4,24,24 | tail -n +2)" <<'PY'
import json, sys
a, b = (json.loads(x)["outputs"][0]["data"] for x in sys.argv[1:3])
assert a == b, (a, b)
PY
check "the version route" bash -c "curl -sf '$URL/v2/models/tiny/versions/1/ready'"
check "an unknown version: 404" bash -c \
  "curl -s -o /dev/null -w '%{http_code}' '$URL/v2/models/tiny/versions/7/ready' | grep -qx 404"
stop_server

# --- model parallel: the model split between two processes ------------------------------------
start_server staged tiny="$CKPT" --stages 2
check "--stages 2: serves, its address on its first line" bash -c "head -1 '$WORK/staged.out' | grep -q '^listening on '"
check "the model line says which units run where" grep -q "units 0-.* here (.* MB), unit.* at 127.0.0.1:" "$WORK/staged.err"
STAGE_PID=$(pgrep -P "$PID" -f "serve-stage")
check "the second stage is a process of its own" test -n "$STAGE_PID"
check "the split model answers as one process did" python3 - "$CKPT_ANSWER" \
  "$(infer "$URL" tiny 1,3,4,24,24 | tail -n +2)" <<'PY'
import json, sys
a, b = (json.loads(x)["outputs"][0]["data"] for x in sys.argv[1:3])
assert len(a) == len(b) and all(abs(x - y) <= 1e-5 * max(1, abs(x)) for x, y in zip(a, b)), (a, b)
PY
kill -TERM "$PID"; wait "$PID"
check "SIGTERM: the front exits 0" test $? -eq 0
gone() { [ ! -e "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status"; }
check "and the stage process is gone" wait_for "the stage to exit" gone "$STAGE_PID"
check "--stages 2 on TorchScript is refused" bash -c \
  "'$REEL' serve '$WORK/none.pt' --stages 2 --port 0 > /dev/null 2> '$WORK/staged_ts.err'; [ \$? -ne 0 ] && grep -q 'cannot be split' '$WORK/staged_ts.err'"

# --- TorchScript from Python PyTorch ---------------------------------------------------------
# torch.jit.script reads the module's source: the script must be a file.
cat > "$WORK/make_head.py" <<'PY'
import json, sys, torch
class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3 * 2, 5)
    def forward(self, x):
        return self.fc(x.mean(dim=(3, 4)).flatten(1))
torch.manual_seed(0)
model = torch.jit.script(Head().eval())
model.save(sys.argv[1] + "/head.pt")
pixels = torch.arange(3 * 2 * 8 * 8) % 256
x = pixels.reshape(1, 3, 2, 8, 8).float() / 255
mean = torch.tensor([0.43216, 0.394666, 0.37645]).reshape(1, 3, 1, 1, 1)
std = torch.tensor([0.22803, 0.22145, 0.216989]).reshape(1, 3, 1, 1, 1)
print(json.dumps(model((x - mean) / std).tolist()[0]))
PY
/usr/bin/python3 "$WORK/make_head.py" "$WORK" > "$WORK/torch.json"  # Debian's, with python3-torch
printf 'data: {clip_frames: 2, size: 8}\n' > "$WORK/head.yaml"
printf 'secret-one\n# a comment\n  secret-two  \n' > "$WORK/tokens"
start_server script "$WORK/head.pt" --config "$WORK/head.yaml" --token-file "$WORK/tokens"
check "serve a TorchScript file under its stem" test -n "$URL"
check "no token: 401" bash -c "infer '$URL' head 1,3,2,8,8 | head -1 | grep -qx 401"
check "health needs no token" bash -c "curl -sf '$URL/v2/health/ready'"
check "TorchScript answers equal PyTorch's" python3 - "$(cat "$WORK/torch.json")" \
  "$(infer "$URL" head 1,3,2,8,8 -H 'Authorization: Bearer secret-two' | tail -n +2)" <<'PY'
import json, sys
want = json.loads(sys.argv[1])
got = json.loads(sys.argv[2])["outputs"][0]["data"]
assert len(got) == 5 and all(abs(a - b) < 1e-4 for a, b in zip(want, got)), (want, got)
PY
check "TorchScript served frozen, as its metadata says" bash -c \
  "curl -sf -H 'Authorization: Bearer secret-two' '$URL/v2/models/head' | python3 -c \
  'import json, sys; assert json.load(sys.stdin)[\"parameters\"][\"optimization\"] == \"frozen, optimized for inference\"'"
stop_server

# --- serve.yaml: per-model settings -------------------------------------------------------------
mkdir -p "$WORK/conf"
cat > "$WORK/conf/serve.yaml" <<YAML
models:
  - {uri: models:/tiny@production, name: prod, max_batch: 2, preferred_batch: [2]}
  - {uri: $CKPT, name: ckpt, max_batch: 4, canary: models:/tiny/1, canary_percent: 100}
allow_uri_prefix: [$SRC/testdata/videos]
poll_interval: 0
YAML
start_server yaml --config "$WORK/conf/serve.yaml"
check "serve.yaml: both models served" bash -c \
  "curl -sf '$URL/v2/models/prod/ready' && curl -sf '$URL/v2/models/ckpt/ready'"
check "... each with its own max batch" bash -c \
  "curl -sf '$URL/v2/models/prod' | grep -q '\"max_batch_size\":2' && curl -sf '$URL/v2/models/ckpt' | grep -q '\"max_batch_size\":4'"
check "... the canary takes its share (100%)" bash -c \
  "curl -sf '$URL/v2/models/ckpt' | grep -q '\"canary\":{\"percent\":100'"
check "... and its allowed prefix" bash -c \
  "curl -sf -d '{\"inputs\":[{\"name\":\"uri\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"$VIDEOS/mmaction2_test.mp4\"]}]}' '$URL/v2/models/prod/infer' | grep -q '\"shape\":\[1,8\]'"
stop_server
printf 'models:\n  - {uri: %s, max_bach: 2}\n' "$CKPT" > "$WORK/conf/typo.yaml"
check "serve.yaml: an unknown key is named with its line, exit 3" bash -c \
  "'$REEL' serve --config '$WORK/conf/typo.yaml' --port 0 > /dev/null 2> '$WORK/e'; [ \$? -eq 3 ] && grep -q 'typo.yaml:2:.*max_bach' '$WORK/e'"
printf 'models: []\n' > "$WORK/conf/empty.yaml"
check "serve.yaml: no model, exit 3" bash -c \
  "'$REEL' serve --config '$WORK/conf/empty.yaml' --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"

# --- Kubernetes objects, checked against the API schema offline ------------------------------
check "--emit-k8s writes the objects and serves nothing" "$REEL" serve models:/tiny@production \
  --emit-k8s "$WORK/k8s.yaml" --image registry.example/reel:1 --replicas 1:3 --max-batch 4
check "... a Deployment, Service, autoscaler 1..3 and budget, valid for the Kubernetes API" bash -c \
  "node '$SRC/tools/k8s-validate/validate.mjs' '$WORK/k8s.yaml' > '$WORK/k8s.check' && [ \$(grep -c '^ok ' '$WORK/k8s.check') -eq 4 ] && grep -q 'maxReplicas: 3' '$WORK/k8s.yaml'"
check "... the pod serves the same models with the same flags" bash -c \
  "grep -q 'models:/tiny@production' '$WORK/k8s.yaml' && grep -A1 -- '--max-batch' '$WORK/k8s.yaml' | grep -q '\"4\"'"
check "... and finds the same registry" grep -q "$WORK/registry" "$WORK/k8s.yaml"
check "--emit-k8s without --image: exit 3" bash -c \
  "'$REEL' serve models:/tiny@production --emit-k8s - > /dev/null 2>&1; [ \$? -eq 3 ]"
check "--replicas 3:1: exit 3" bash -c \
  "'$REEL' serve models:/tiny@production --emit-k8s - --image i --replicas 3:1 > /dev/null 2>&1; [ \$? -eq 3 ]"

# --- bad command lines: one line, the README's exit codes, nothing served -------------------
check "a missing file: exit 2" bash -c "'$REEL' serve '$WORK/nope.pt' --port 0 > /dev/null 2> '$WORK/e'; [ \$? -eq 2 ] && [ \$(wc -l < '$WORK/e') -eq 1 ]"
echo "not torchscript" > "$WORK/junk.pt"
check "a file that is not TorchScript: exit 3" bash -c "'$REEL' serve '$WORK/junk.pt' --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"
check "a bad NAME=: exit 3" bash -c "'$REEL' serve 'bad name=$CKPT' --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"
check "an unknown version: exit 2" bash -c "'$REEL' serve models:/tiny/9 --port 0 > /dev/null 2>&1; [ \$? -eq 2 ]"
check "an unknown precision: exit 3" bash -c "'$REEL' serve '$CKPT' --precision fp16 --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"
check "a preferred batch above max: exit 3" bash -c "'$REEL' serve '$CKPT' --max-batch 2 --preferred-batch 4 --port 0 > /dev/null 2>&1; [ \$? -eq 3 ]"

finish
