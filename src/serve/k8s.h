// The Kubernetes objects that run `reel serve` on a cluster (`reel serve --emit-k8s`), as one
// multi-document YAML text for `kubectl apply -f -`, in this order:
//   - Deployment (apps/v1): one container running `reel serve ARGS --host 0.0.0.0 --port PORT`,
//     CPU and memory requests equal to their limits (so LibTorch's threads are the cores it
//     gets), OMP_WAIT_POLICY=PASSIVE, a startup probe on /v2/health/live that gives loading and
//     warming up the models `startup_seconds`, then readiness on /v2/health/ready and liveness
//     on /v2/health/live (the paths `reel serve` answers without a token), rolling updates that
//     add a pod before taking one away, and terminationGracePeriodSeconds for the server's
//     SIGTERM drain (stop accepting, answer what is in flight). It leaves spec.replicas out:
//     the HorizontalPodAutoscaler owns the count, and a re-apply does not reset it.
//   - Service (v1): ClusterIP, port PORT to the container's port named "http".
//   - HorizontalPodAutoscaler (autoscaling/v2): min_replicas..max_replicas on average CPU
//     utilisation (a percentage of the request).
//   - PodDisruptionBudget (policy/v1): min_available pods kept through voluntary disruptions.
// All four carry the same labels, and the selectors of the Deployment, the Service and the budget
// are the same two of them (app.kubernetes.io/name: reel, app.kubernetes.io/instance: NAME).
//
// Without --threads among `args`, EmitK8s adds `--threads N`, N = cpu cores / --instances (at
// least 1): `reel serve` counts the node's cores otherwise, not the pod's CPU limit.
// With token_secret, the Secret is mounted read-only at kTokenMountPath and its key
// token_secret_key is passed as --token-file.
//
// Errors: InvalidArgument naming the bad field (a name that is not a DNS label, an empty image,
// a port out of range, min_replicas > max_replicas, a CPU or memory that is not a Kubernetes
// quantity, --host, --port or --token-file among args, ...). Nothing is read or written.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace reel::serve {

inline constexpr const char* kTokenMountPath = "/etc/reel/tokens";

struct K8sOptions {
  std::string name = "reel-serve";  // every object's name: a DNS-1035 label (a-z0-9-, 63 at most)
  std::string k8s_namespace;        // metadata.namespace; empty: none (kubectl's namespace)
  std::string image;                // the container image holding `reel` (required)
  std::string binary = "reel";      // `reel` in the image: a path or a name on its PATH
  // `reel serve`'s arguments: models ([NAME=]URI) and flags, but not --host, --port and
  // --token-file, which EmitK8s sets.
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // more environment (REEL_REGISTRY_URI...)
  int port = 8000;                                       // the container's and the Service's
  int min_replicas = 1, max_replicas = 1;                // the autoscaler's range
  int target_cpu_percent = 70;  // the autoscaler's target: CPU use, % of the request, 1..100
  std::string cpu = "2";        // CPU request and limit: cores ("2", "0.5") or millicores ("500m")
  std::string memory = "4Gi";   // memory request and limit: "4Gi", "512Mi", bytes
  int min_available = 1;        // the disruption budget, 0..min_replicas
  std::string token_secret;     // optional: a Secret holding the bearer tokens
  std::string token_secret_key = "tokens";  // its key, one token per line (--token-file's form)
  int termination_grace_seconds = 30;       // SIGTERM to SIGKILL; the server drains for up to 10 s
  int startup_seconds = 300;                // loading and warming up the models may take this long

  // InvalidArgument naming the first bad field (args' flags too: --host, --port, --token-file,
  // and --instances that is not a number).
  Status Validate() const;
};

// The four objects as YAML documents, each starting with "---".
Result<std::string> EmitK8s(const K8sOptions& options);

}  // namespace reel::serve
