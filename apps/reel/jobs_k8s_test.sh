#!/usr/bin/env bash
# `reel jobs submit --executor k8s --dry-run`: a job's Service, Indexed Job and
# PodDisruptionBudget, validated offline against the Kubernetes API schema (tools/k8s-validate,
# npm's kubernetes-models), then broken on purpose so that the validator must refuse them; and
# what the objects say (Kueue labels, gang size, torchrun's variables, GPUs, spot placement).
# Needs node and tools/k8s-validate's node_modules (scripts/setup.sh --tests installs both).
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
"$REEL" jobs submit --executor k8s --image x --name e -- sleep 1 > err.out 2>&1
check "without --dry-run it says what to do" bash -c "[ $? -eq 6 ] && grep -q 'give --dry-run' err.out"
"$REEL" jobs submit --executor nomad -- sleep 1 > err.out 2>&1
check "an unknown executor exits 3" bash -c "[ $? -eq 3 ] && grep -q 'executor must be local or k8s' err.out"
finish
