// A Reel job as Kubernetes objects (`reel jobs submit --executor k8s --dry-run`), one YAML text
// for `kubectl apply -f -`, in this order:
//   - Service (v1), headless: the workers' DNS names for the rendezvous (MASTER_ADDR is worker
//     0's, NAME-0.NAME).
//   - Job (batch/v1), Indexed: one pod per worker, all started together (parallelism =
//     completions = workers), torchrun's variables from the pod's completion index (RANK) and
//     the job (WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK 0, LOCAL_WORLD_SIZE 1), requests
//     equal to limits for cpu, memory and nvidia.com/gpu, the time limit as
//     activeDeadlineSeconds and the TTL as ttlSecondsAfterFinished. With a queue it carries
//     Kueue's labels (queue name, priority class) and starts suspended, so that a cluster running
//     Kueue admits it whole; a job that accepts spot nodes tolerates their taint and prefers
//     them (node affinity on the spot label).
//   - PodDisruptionBudget (policy/v1): every worker kept through voluntary disruptions (a gang
//     with one pod gone is stuck).
// Errors: InvalidArgument naming the field (a name that is not a DNS-1035 label, no image, an
// elastic job, whose resizes Kubernetes cannot do in place). Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/status.h"
#include "sched/jobs.h"

namespace reel::sched {

struct K8sJobOptions {
  std::string name;                          // the objects' name: a DNS-1035 label
  std::string image;                         // the container image (the Dockerfile's)
  std::string k8s_namespace;                 // "": the one kubectl uses
  std::string kueue_queue;                   // Kueue LocalQueue; "": no Kueue labels
  std::string priority_class;                // Kueue WorkloadPriorityClass; "": none
  int port = 29500;                          // the rendezvous port
  std::string spot_label = "reel.dev/spot";  // spot nodes' label "true", and their taint's key
};

Result<std::string> EmitJobK8s(const JobRecord& job, const K8sJobOptions& options);

}  // namespace reel::sched
