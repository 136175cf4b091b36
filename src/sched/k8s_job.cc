#include "sched/k8s_job.h"

#include "base/k8s_yaml.h"
#include "base/quantity.h"

namespace reel::sched {
namespace {

using Object = nlohmann::ordered_json;

Object Labels(const K8sJobOptions& o) {
  Object l = Object::object();
  l["app.kubernetes.io/name"] = "reel";
  l["app.kubernetes.io/instance"] = o.name;
  l["app.kubernetes.io/component"] = "job";
  return l;
}

Object Metadata(const K8sJobOptions& o, const Object& labels) {
  return K8sMetadata(o.name, o.k8s_namespace, labels);
}

Object EnvValue(const std::string& name, const std::string& value) {
  return Object{{"name", name}, {"value", value}};
}

Object EnvField(const std::string& name, const std::string& path) {
  return Object{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

Object Env(const JobRecord& job, const K8sJobOptions& o) {
  Object env = Object::array();
  env.push_back(
      EnvField("RANK", "metadata.annotations['batch.kubernetes.io/job-completion-index']"));
  env.push_back(EnvValue("WORLD_SIZE", std::to_string(job.spec.min_workers)));
  env.push_back(EnvValue("LOCAL_RANK", "0"));
  env.push_back(EnvValue("LOCAL_WORLD_SIZE", "1"));
  env.push_back(EnvValue("MASTER_ADDR", o.name + "-0." + o.name));
  env.push_back(EnvValue("MASTER_PORT", std::to_string(o.port)));
  env.push_back(EnvValue("REEL_JOB_ID", o.name));
  env.push_back(EnvField("REEL_NODE", "spec.nodeName"));
  for (const auto& [k, v] : job.env) env.push_back(EnvValue(k, v));
  return env;
}

// Requests equal to limits: the pod gets what the scheduler counted (Guaranteed QoS).
Object ResourceLimits(const JobRecord& job) {
  Object amounts = Object::object();
  const auto& r = job.spec.per_worker;
  if (r.cpu_millis > 0) amounts["cpu"] = FormatCpu(r.cpu_millis);
  if (r.memory_bytes > 0) amounts["memory"] = FormatMemory(r.memory_bytes);
  if (r.gpu > 0) amounts["nvidia.com/gpu"] = std::to_string(r.gpu);
  return Object{{"requests", amounts}, {"limits", amounts}};
}

void Placement(const JobRecord& job, const K8sJobOptions& o, Object* pod) {
  if (!job.spec.node_selector.empty()) {
    Object selector = Object::object();
    for (const auto& [k, v] : job.spec.node_selector) selector[k] = v;
    (*pod)["nodeSelector"] = selector;
  }
  if (!job.spec.spot_ok) return;
  (*pod)["tolerations"] =
      Object::array({{{"key", o.spot_label}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  Object term = {
      {"matchExpressions",
       Object::array({{{"key", o.spot_label}, {"operator", "In"}, {"values", {"true"}}}})}};
  (*pod)["affinity"] = {{"nodeAffinity",
                         {{"preferredDuringSchedulingIgnoredDuringExecution",
                           Object::array({{{"weight", 100}, {"preference", term}}})}}}};
}

Object ServiceObject(const K8sJobOptions& o, const Object& labels) {
  Object s = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", Metadata(o, labels)}};
  s["spec"] = {{"clusterIP", "None"},
               {"selector", labels},
               {"ports", Object::array({{{"name", "rendezvous"}, {"port", o.port}}})}};
  return s;
}

Object JobObject(const JobRecord& job, const K8sJobOptions& o, const Object& labels) {
  Object job_labels = labels;
  if (!o.kueue_queue.empty()) job_labels["kueue.x-k8s.io/queue-name"] = o.kueue_queue;
  if (!o.priority_class.empty()) job_labels["kueue.x-k8s.io/priority-class"] = o.priority_class;
  Object container = {
      {"name", "worker"},
      {"image", o.image},
      {"command", job.command},
      {"env", Env(job, o)},
      {"ports", Object::array({{{"name", "rendezvous"}, {"containerPort", o.port}}})},
      {"resources", ResourceLimits(job)}};
  Object pod = {{"subdomain", o.name}, {"restartPolicy", "Never"}};
  Placement(job, o, &pod);
  pod["containers"] = Object::array({container});
  const int workers = job.spec.min_workers;
  Object spec = {{"completionMode", "Indexed"},
                 {"completions", workers},
                 {"parallelism", workers},
                 {"backoffLimit", 0}};  // a gang lives and dies together; Reel requeues it
  if (!o.kueue_queue.empty()) spec["suspend"] = true;  // Kueue unsuspends it once admitted
  if (job.spec.time_limit) {
    spec["activeDeadlineSeconds"] = std::max<int64_t>(1, job.spec.time_limit->count() / 1000);
  }
  if (job.ttl_after_finished.count() > 0) {
    spec["ttlSecondsAfterFinished"] = job.ttl_after_finished.count() / 1000;
  }
  spec["template"] = {{"metadata", {{"labels", labels}}}, {"spec", pod}};
  return Object{{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", Metadata(o, job_labels)},
                {"spec", spec}};
}

Object BudgetObject(const JobRecord& job, const K8sJobOptions& o, const Object& labels) {
  Object b = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", Metadata(o, labels)}};
  b["spec"] = {{"minAvailable", job.spec.min_workers}, {"selector", {{"matchLabels", labels}}}};
  return b;
}

Status Validate(const JobRecord& job, const K8sJobOptions& o) {
  if (!IsDnsLabel(o.name, /*letter_first=*/true)) {
    return InvalidArgumentError("name '" + o.name +
                                "' is not a DNS-1035 label (a-z, 0-9 and '-', starting with a "
                                "letter, 63 at most): give --name");
  }
  if (!o.k8s_namespace.empty() && !IsDnsLabel(o.k8s_namespace, false)) {
    return InvalidArgumentError("namespace '" + o.k8s_namespace + "' is not a DNS label");
  }
  if (o.image.empty()) return InvalidArgumentError("a Kubernetes job needs --image");
  if (job.spec.min_workers != job.spec.max_workers) {
    return InvalidArgumentError(
        "an elastic job (--workers MIN:MAX) cannot be resized in place on Kubernetes: give a "
        "fixed --workers");
  }
  if (job.command.empty()) return InvalidArgumentError("a job needs a command");
  if (o.port < 1 || o.port > 65535) return InvalidArgumentError("port out of range");
  return Status::Ok();
}

}  // namespace

Result<std::string> EmitJobK8s(const JobRecord& job, const K8sJobOptions& options) {
  REEL_RETURN_IF_ERROR(Validate(job, options));
  const Object labels = Labels(options);
  return K8sManifests({ServiceObject(options, labels), JobObject(job, options, labels),
                       BudgetObject(job, options, labels)});
}

}  // namespace reel::sched
