#!/usr/bin/env bash
# The Kubernetes objects EmitK8s writes (`reel serve --emit-k8s`), validated offline against the
# Kubernetes API schema by tools/k8s-validate (npm's kubernetes-models), and broken objects the
# validator must refuse, so that a validator that passes everything cannot pass this test.
# Needs node and `npm ci` in tools/k8s-validate (scripts/setup.sh --tests does both).
# Usage: k8s_validate_test.sh PATH_TO_K8S_EMIT_TOOL SOURCE_DIR
set -u
TOOL=$1
SRC=$2
source "$SRC/apps/reel/check_lib.sh"
VALIDATOR="$SRC/tools/k8s-validate/validate.mjs"

if ! command -v node > /dev/null; then
  echo "FAIL node is not installed: run scripts/setup.sh --tests"
  exit 1
fi
if [ ! -f "$SRC/tools/k8s-validate/node_modules/kubernetes-models/package.json" ]; then
  echo "FAIL tools/k8s-validate/node_modules is missing: run scripts/setup.sh --tests" \
    "(or npm ci in tools/k8s-validate)"
  exit 1
fi

source "$SRC/tools/k8s-validate/validate_lib.sh"  # validates NAME FILE OKS INVALIDS [PATTERN]

for scenario in minimal full; do
  check "emit $scenario" bash -c "'$TOOL' $scenario > '$WORK/$scenario.yaml'"
  check "$scenario: Deployment, Service, HorizontalPodAutoscaler and PodDisruptionBudget valid" \
    validates "$scenario" "$WORK/$scenario.yaml" 4 0
done
check "stdin is read too" bash -c "node '$VALIDATOR' < '$WORK/full.yaml' | grep -q '^ok Deployment classify$'"

# A Deployment with a string replica count: the schema says integer.
cat > "$WORK/string-replicas.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: reel-serve
spec:
  replicas: "two"
  selector:
    matchLabels: {app: reel}
  template:
    metadata:
      labels: {app: reel}
    spec:
      containers:
        - name: serve
          image: reel:1.0
YAML
check "a string replica count is refused" \
  validates string-replicas "$WORK/string-replicas.yaml" 0 1 "spec/replicas must be integer"

# The emitted objects, broken one at a time: only the broken one is refused.
break_emitted() {  # break_emitted NAME SED_EXPRESSION PATTERN
  sed "$2" "$WORK/full.yaml" > "$WORK/$1.yaml"
  if cmp -s "$WORK/full.yaml" "$WORK/$1.yaml"; then
    echo "     $1: '$2' changed nothing in the emitted YAML"
    return 1
  fi
  validates "$1" "$WORK/$1.yaml" 3 1 "$3"
}
check "a string containerPort is refused" \
  break_emitted container-port 's/containerPort: 8080/containerPort: "8080"/' "containerPort must be integer"
check "a probe without its handler's port is refused" \
  break_emitted probe-port '0,/port: http$/{/port: http$/d}' "httpGet must have required property port"
check "an HPA without maxReplicas is refused" \
  break_emitted no-max '/maxReplicas:/d' "spec must have required property maxReplicas"
check "a malformed memory quantity is refused" \
  break_emitted memory 's/memory: "6Gi"/memory: "6 gigs"/' "quantity"
check "an unknown kind is refused" \
  break_emitted kind 's/^kind: PodDisruptionBudget$/kind: PodDisruptionBudgets/' "knows no PodDisruptionBudgets"

# Not YAML, and YAML without an object.
printf 'apiVersion: [v1\n' > "$WORK/broken.yaml"
check "YAML that does not parse is refused" validates broken "$WORK/broken.yaml" 0 1 "YAML"
printf -- '---\n' > "$WORK/empty.yaml"
check "a file without an object is refused" validates empty "$WORK/empty.yaml" 0 1 "no Kubernetes object"
finish
