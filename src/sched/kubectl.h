// Reel's jobs on a Kubernetes cluster, through kubectl (which brings the kubeconfig's
// authentication and TLS; kubectl 1.20 and later): k8s_job.h's objects applied server-side
// (field manager "reel"), and a Job's state read back and followed to its end.
//
// Errors: Unavailable with kubectl's own message when it fails (no cluster, no rights), NotFound
// for a Job the cluster does not have, FailedPrecondition when kubectl is not installed,
// DataLoss for an answer that is not a Job. Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/status.h"

namespace reel::sched {

struct KubectlOptions {
  std::string kubectl = "kubectl";
  std::string kubeconfig;     // "": kubectl's own (KUBECONFIG, ~/.kube/config)
  std::string k8s_namespace;  // "": the kubeconfig context's
};

// What a batch/v1 Job's status says, as one of:
//   queued      suspended: waiting for Kueue to admit it
//   pending     admitted, no pod created yet
//   starting    pods created, not all ready (scheduling, pulling the image)
//   running     every worker's pod ready
//   failing     the Job has failed; its pods are being stopped
//   succeeding  every worker succeeded; pods are being cleaned up
//   succeeded, failed
struct K8sJobState {
  std::string phase;
  int64_t workers = 0, active = 0, ready = 0, succeeded = 0, failed = 0;
  std::string reason, message;  // the deciding condition's
  bool done() const { return phase == "succeeded" || phase == "failed"; }
  // "running: 2/2 workers ready", "failed: BackoffLimitExceeded (Job has reached ...)".
  std::string Describe() const;
};

Result<K8sJobState> ReadK8sJobState(const nlohmann::json& job);

// Returns kubectl's report ("job.batch/x serverside-applied", one line per object).
Result<std::string> ApplyK8s(const std::string& manifests, const KubectlOptions& options);

Result<K8sJobState> GetK8sJobState(const std::string& name, const KubectlOptions& options);

// Deletes the Job and its Service and budget; its pods get `grace` to stop. Returns kubectl's
// report. Objects already gone are not an error.
Result<std::string> DeleteK8sJob(const std::string& name, std::chrono::milliseconds grace,
                                 const KubectlOptions& options);

// Polls the Job every `interval` until it is done or `timeout` passes (DeadlineExceeded naming
// its last state), calling `on_change` with each state that differs from the one before.
Result<K8sJobState> FollowK8sJob(const std::string& name, const KubectlOptions& options,
                                 std::chrono::milliseconds interval,
                                 std::chrono::milliseconds timeout, Clock* clock,
                                 const std::function<void(const K8sJobState&)>& on_change);

}  // namespace reel::sched
