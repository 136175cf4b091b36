#!/usr/bin/env bash
# `reel jobs submit --executor k8s --dry-run`: a job's Service, Indexed Job and
# PodDisruptionBudget, validated offline against the Kubernetes API schema (tools/k8s-validate,
# npm's kubernetes-models), then broken on purpose so that the validator must refuse them; and
# what the objects say (Kueue labels, gang size, torchrun's variables, GPUs, spot placement).
# Then applied for real with kubectl to an API server that answers recorded responses
# (k8s_api_replay.py), and followed to success, to failure and past a timeout.
# Needs node, tools/k8s-validate's node_modules and kubectl (scripts/setup.sh --tests).
# Usage: jobs_k8s_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$SRC/apps/reel/check_lib.sh"
VALIDATOR="$SRC/tools/k8s-validate/validate.mjs"
source "$SRC/tools/k8s-validate/validate_lib.sh"
cd "$WORK"

submit() { "$REEL" jobs submit --executor k8s --dry-run --image registry.local/reel:0.1 "$@"; }
check "a plain job's objects" bash -c "$(declare -f submit); REEL='$REEL'; submit --name tiny -- sleep 1 > tiny.yaml"
check "are valid: Service, Job, PodDisruptionBudget" validates tiny tiny.yaml 3 0
check "a training gang's objects" bash -c "$(declare -f submit); REEL='$REEL'; submit --name train-a --workers 4 \
  --cpu 2 --memory 8Gi --gpu 1 --spot --time-limit 2h --ttl 1h --env OMP_NUM_THREADS=2 --selector zone=a \
  --queue team-a --priority-class high -- reel train --config configs/synthetic.yaml > train.yaml"
check "are valid too" validates train train.yaml 3 0
check "carry Kueue's labels and start suspended for it" bash -c "grep -q 'kueue.x-k8s.io/queue-name: team-a' train.yaml &&
  grep -q 'kueue.x-k8s.io/priority-class: high' train.yaml && grep -q 'suspend: true' train.yaml"
check "run the gang whole, indexed, its budget keeping every worker" bash -c "grep -q 'completionMode: Indexed' train.yaml &&
  grep -q 'completions: 4' train.yaml && grep -q 'parallelism: 4' train.yaml && grep -q 'minAvailable: 4' train.yaml"
check "give torchrun's variables, the rendezvous at worker 0" bash -c "grep -q \"job-completion-index\" train.yaml &&
  grep -A1 'name: MASTER_ADDR' train.yaml | grep -q 'value: train-a-0.train-a' && grep -A1 'name: WORLD_SIZE' train.yaml | grep -q '\"4\"'"
check "ask for GPUs, CPUs and memory as requests equal to limits" bash -c "[ \$(grep -c 'nvidia.com/gpu: \"1\"' train.yaml) = 2 ] &&
  [ \$(grep -c 'memory: .8Gi.' train.yaml) = 2 ]"
check "tolerate and prefer spot nodes, and stop at the time limit" bash -c "grep -q 'key: reel.dev/spot' train.yaml &&
  grep -q preferredDuringSchedulingIgnoredDuringExecution train.yaml && grep -q 'activeDeadlineSeconds: 7200' train.yaml"

# Broken one at a time, the validator refuses exactly the broken object.
break_job() {  # break_job NAME SED_EXPRESSION PATTERN
  sed "$2" train.yaml > "$1.yaml"
  if cmp -s train.yaml "$1.yaml"; then echo "     $1: '$2' changed nothing"; return 1; fi
  validates "$1" "$1.yaml" 2 1 "$3"
}
check "a string completion count is refused" break_job completions 's/completions: 4/completions: "4"/' "completions must be integer"
check "a budget whose minAvailable is a list is refused" \
  break_job budget 's/minAvailable: 4/minAvailable: [4]/' "minAvailable"

# Mistakes.
"$REEL" jobs submit --executor k8s --dry-run --name tiny -- sleep 1 > err.out 2>&1
check "no image exits 3" bash -c "[ $? -eq 3 ] && grep -q 'needs --image' err.out"
"$REEL" jobs submit --executor k8s --dry-run --image x --name Bad_Name -- sleep 1 > err.out 2>&1
check "a name that is not a DNS label exits 3" bash -c "[ $? -eq 3 ] && grep -q \"name 'Bad_Name' is not a DNS-1035 label\" err.out"
"$REEL" jobs submit --executor k8s --dry-run --image x --name e --workers 1:2 -- sleep 1 > err.out 2>&1
check "an elastic job exits 3" bash -c "[ $? -eq 3 ] && grep -q 'cannot be resized in place on Kubernetes' err.out"
HOME="$WORK" KUBECONFIG="" "$REEL" jobs submit --executor k8s --image x --name e -- sleep 1 > err.out 2>&1
check "without a kubeconfig it says what to do (exit 6)" bash -c "[ $? -eq 6 ] && grep -q 'no kubeconfig' err.out && grep -q -- '--dry-run prints' err.out"
"$REEL" jobs submit --executor nomad -- sleep 1 > err.out 2>&1
check "an unknown executor exits 3" bash -c "[ $? -eq 3 ] && grep -q 'executor must be local or k8s' err.out"

# Applied with the real kubectl to an API server answering recorded responses
# (testdata/k8s/api: discovery, OpenAPI, and each Job's states in turn).
echo "applying and following through kubectl"
export HOME="$WORK"  # kubectl's discovery cache
python3 "$SRC/apps/reel/k8s_api_replay.py" "$SRC/testdata/k8s/api" "$WORK/api.log" > port &
api=$!
trap 'kill $api 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
cat > kubeconfig <<EOF
apiVersion: v1
kind: Config
clusters: [{name: replay, cluster: {server: "http://127.0.0.1:$(cat port)"}}]
users: [{name: reel, user: {token: test}}]
contexts: [{name: replay, context: {cluster: replay, user: reel}}]
current-context: replay
EOF
apply() {  # apply NAME [FLAGS]: the job applied and followed; its exit code in $code
  local name=$1; shift
  "$REEL" jobs submit --executor k8s --kubeconfig kubeconfig --namespace ml --image registry.local/reel:0.1 \
    --name "$name" --workers 2 --queue team-a --wait --poll 0.05s "$@" -- reel train --config c.yaml > "$name.out" 2>&1
  code=$?
}
apply ok-train
check "a job Kueue admits runs to completion: exit 0" test "$code" -eq 0
check "its three objects are applied server-side" bash -c "grep -qx 'service/ok-train serverside-applied' ok-train.out &&
  grep -qx 'job.batch/ok-train serverside-applied' ok-train.out && grep -qx 'poddisruptionbudget.policy/ok-train serverside-applied' ok-train.out"
check "and each state is reported once, in order" bash -c "[ \"\$(grep '^job/' ok-train.out)\" = 'job/ok-train queued: waiting for admission (Job suspended)
job/ok-train starting: 0/2 workers ready
job/ok-train running: 2/2 workers ready
job/ok-train succeeded: 2/2 workers: CompletionsReached' ]"
check "the API server got them as server-side apply in the namespace, by field manager reel" python3 - "$WORK/api.log" <<'PYEOF2'
import json, sys
patches = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["method"] == "PATCH"]
paths = [p["path"] for p in patches]
assert paths == ["/api/v1/namespaces/ml/services/ok-train", "/apis/batch/v1/namespaces/ml/jobs/ok-train",
                 "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/ok-train"], paths
assert all(p["query"]["fieldManager"] == ["reel"] and p["content_type"] == "application/apply-patch+yaml" for p in patches)
job = json.loads(patches[1]["body"])
assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" and job["spec"]["suspend"] is True, job
PYEOF2
apply bad-train
check "a gang whose worker fails: exit 1" test "$code" -eq 1
check "saying why, after the pods stopped" bash -c "tail -n 2 bad-train.out | head -n 1 | grep -q '^job/bad-train failing' &&
  tail -n 1 bad-train.out | grep -qx 'job/bad-train failed: BackoffLimitExceeded (Job has reached the specified backoff limit)'"
apply slow-train --timeout 0s
check "past --timeout it gives up naming the state" bash -c "[ $code -eq 1 ] && grep -q 'job slow-train is still queued: waiting for admission' slow-train.out"
"$REEL" jobs submit --executor k8s --kubeconfig kubeconfig --namespace forbidden --image x --name e -- sleep 1 > err.out 2>&1
code=$?
check "the API server's refusal is one line, exit 5" bash -c "[ $code -eq 5 ] && [ \$(wc -l < err.out) -eq 1 ] &&
  grep -q 'kubectl apply failed: .*cannot patch resource \"services\" in API group \"\" in the namespace \"forbidden\"' err.out"

echo "a pipeline's tasks as Kubernetes Jobs, through the same writer"
for name in ok bad; do
  cat > "$name.yaml" <<EOF
name: $name
tasks:
  - {name: first, command: [sh, -c, 'echo $name'], env: {STAGE: "1"}}
  - {name: second, depends_on: [first], command: [reel, --version]}
EOF
done
: > api.log
pipe() {  # pipe NAME: its run on the cluster; exit code in $code
  REEL_PIPELINE_STATE="$WORK/pipelines" "$REEL" pipeline run "$1.yaml" --executor k8s --kubeconfig kubeconfig \
    --namespace ml --image registry.local/reel:0.1 --poll 0.05s > "pipe-$1.out" 2>&1
  code=$?
}
pipe ok
check "a pipeline whose Jobs complete succeeds" test "$code" -eq 0
check "each task's Job is applied only once the one it depends on completed" python3 - "$WORK/api.log" <<'PYEOF2'
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
def at(method, path):
    return [i for i, r in enumerate(log) if r["method"] == method and r["path"] == path]
first = "/apis/batch/v1/namespaces/ml/jobs/ok-1-first"
second = "/apis/batch/v1/namespaces/ml/jobs/ok-1-second"
assert at("PATCH", first) and at("PATCH", second), "both applied"
assert at("PATCH", second)[0] > at("GET", first)[-1], "second applied before first had completed"
job = json.loads(log[at("PATCH", first)[0]]["body"])
c = job["spec"]["template"]["spec"]["containers"][0]
assert c["command"] == ["sh", "-c", "echo ok"], c["command"]
env = {e["name"]: e.get("value") for e in c["env"]}
assert env.get("STAGE") == "1" and env.get("REEL_RUN_ID") == "ok-1" and env.get("REEL_TASK") == "first", env
assert "PATH" not in env and "HOME" not in env and "REEL_SCRATCH" not in env, env
assert json.loads(log[at("PATCH", second)[0]]["body"])["spec"]["template"]["spec"]["containers"][0]["command"] == ["reel", "--version"]
PYEOF2
check "the task's log follows its Job" grep -qx 'job/ok-1-first succeeded: 2/2 workers: CompletionsReached' \
  "$WORK/pipelines/logs/ok-1/first.log"
pipe bad
check "a Job that fails fails its task and skips what depends on it" bash -c "[ $code -eq 1 ] &&
  grep -q \"task 'first' exit 1\" pipe-bad.out && grep -q 'failed: BackoffLimitExceeded' pipe-bad.out"
cat > slow.yaml <<'EOF'
name: slow
tasks:
  - {name: wait, command: [sleep, "3600"], timeout: 1s}
EOF
pipe slow
check "a task past its timeout has its Job, Service and budget deleted, with a grace period" bash -c "[ $code -eq 1 ] && python3 -c \"
import json, sys
deletes = [json.loads(l) for l in open('$WORK/api.log') if json.loads(l)['method'] == 'DELETE']
paths = sorted(d['path'] for d in deletes)
assert paths == ['/api/v1/namespaces/ml/services/slow-1-wait', '/apis/batch/v1/namespaces/ml/jobs/slow-1-wait',
                 '/apis/policy/v1/namespaces/ml/poddisruptionbudgets/slow-1-wait'], paths
assert all(json.loads(d['body'])['gracePeriodSeconds'] > 0 for d in deletes), deletes
\" && grep -q 'job.batch \"slow-1-wait\" deleted' '$WORK/pipelines/logs/slow-1/wait.log'"
REEL_PIPELINE_STATE="$WORK/pipelines" "$REEL" pipeline run ok.yaml --executor k8s > err.out 2>&1
check "without --image: exit 3" bash -c "[ $? -eq 3 ] && grep -q 'needs --image' err.out"
finish
