#include "sched/kubectl.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "base/files.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/subprocess.h"

namespace reel::sched {
namespace {

using nlohmann::json;

// A condition of the Job's status that is "True", or null.
const json* TrueCondition(const json& status, std::string_view type) {
  const auto conditions = status.find("conditions");
  if (conditions == status.end() || !conditions->is_array()) return nullptr;
  for (const json& c : *conditions) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") return &c;
  }
  return nullptr;
}

int64_t Count(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::vector<std::string> Argv(const KubectlOptions& o, std::vector<std::string> args) {
  std::vector<std::string> argv = {o.kubectl};
  if (!o.kubeconfig.empty()) argv.push_back("--kubeconfig=" + o.kubeconfig);
  if (!o.k8s_namespace.empty()) argv.push_back("--namespace=" + o.k8s_namespace);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Result<CommandOutput> Kubectl(const KubectlOptions& o, std::vector<std::string> args) {
  REEL_ASSIGN_OR_RETURN(CommandOutput out,
                        RunCommand(Argv(o, std::move(args)), CurrentEnvironment(), true));
  if (out.exit_code == 127) {
    return FailedPreconditionError("cannot run " + o.kubectl +
                                   " (Debian: apt install kubernetes-client)");
  }
  return out;
}

// kubectl's first complaint: one line for the command's one-line error.
std::string FirstLine(const std::string& text) {
  std::string s = text.substr(0, text.find('\n'));
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string K8sJobState::Describe() const {
  std::string text = phase;
  if (phase == "starting" || phase == "running") {
    text += ": " + std::to_string(ready) + "/" + std::to_string(workers) + " workers ready";
  } else if (phase == "succeeded" || phase == "succeeding") {
    text += ": " + std::to_string(succeeded) + "/" + std::to_string(workers) + " workers";
  }
  if (!reason.empty()) text += ": " + reason;
  if (!message.empty() && (phase == "failed" || phase == "failing" || phase == "queued")) {
    text += " (" + message + ")";
  }
  return text;
}

Result<K8sJobState> ReadK8sJobState(const json& job) {
  if (!job.is_object() || job.value("kind", "") != "Job" || !job.contains("spec")) {
    return DataLossError("the cluster's answer is not a batch/v1 Job");
  }
  const json& spec = job["spec"];
  const json status = job.value("status", json::object());
  K8sJobState s;
  s.workers =
      spec.contains("completions") ? Count(spec, "completions") : Count(spec, "parallelism");
  s.active = Count(status, "active");
  s.ready = Count(status, "ready");
  s.succeeded = Count(status, "succeeded");
  s.failed = Count(status, "failed");
  // The terminal conditions first; FailureTarget and SuccessCriteriaMet come just before them
  // (Kubernetes 1.31+) while the pods stop.
  for (const auto& [type, phase] : {std::pair<const char*, const char*>{"Failed", "failed"},
                                    {"Complete", "succeeded"},
                                    {"FailureTarget", "failing"},
                                    {"SuccessCriteriaMet", "succeeding"}}) {
    if (const json* c = TrueCondition(status, type)) {
      s.phase = phase;
      s.reason = c->value("reason", "");
      s.message = c->value("message", "");
      return s;
    }
  }
  if (spec.value("suspend", false)) {
    s.phase = "queued";
    s.reason = "waiting for admission";
    if (const json* c = TrueCondition(status, "Suspended")) s.message = c->value("message", "");
    return s;
  }
  s.phase = s.active == 0 ? "pending" : s.ready < s.workers ? "starting" : "running";
  return s;
}

// --validate=false: kubectl's own check needs the cluster's OpenAPI document in a form that
// depends on its version (v2 protobuf up to 1.26); the objects are Reel's, checked against the
// API schema by its tests, and the API server still checks every object it admits.
Result<std::string> ApplyK8s(const std::string& manifests, const KubectlOptions& options) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/reel-k8s-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return UnavailableError("cannot write the objects to a file in " + path);
  close(fd);
  Status written = WriteFileAtomically(path, manifests);
  Result<CommandOutput> out =
      written.ok() ? Kubectl(options, {"apply", "--server-side", "--field-manager=reel",
                                       "--validate=false", "-f", path})
                   : Result<CommandOutput>(written);
  unlink(path.c_str());
  REEL_RETURN_IF_ERROR(out.status());
  if (out->exit_code != 0) {
    return UnavailableError("kubectl apply failed: " + FirstLine(out->errors + out->output));
  }
  return out->output;
}

Result<K8sJobState> GetK8sJobState(const std::string& name, const KubectlOptions& options) {
  REEL_ASSIGN_OR_RETURN(CommandOutput out, Kubectl(options, {"get", "job", name, "-o", "json"}));
  if (out.exit_code != 0) {
    if (out.errors.find("NotFound") != std::string::npos) {
      return NotFoundError("the cluster has no job '" + name + "'");
    }
    return UnavailableError("kubectl get job " + name + ": " + FirstLine(out.errors));
  }
  REEL_ASSIGN_OR_RETURN(json job, ParseJson(out.output, "kubectl's answer"));
  return ReadK8sJobState(job);
}

Result<std::string> DeleteK8sJob(const std::string& name, std::chrono::milliseconds grace,
                                 const KubectlOptions& options) {
  const int64_t seconds = std::max<int64_t>(1, grace.count() / 1000);
  REEL_ASSIGN_OR_RETURN(CommandOutput out,
                        Kubectl(options, {"delete", "job,service,poddisruptionbudget", name,
                                          "--grace-period=" + std::to_string(seconds),
                                          "--wait=false", "--ignore-not-found"}));
  if (out.exit_code != 0) {
    return UnavailableError("kubectl delete " + name + ": " + FirstLine(out.errors));
  }
  return out.output;
}

Result<K8sJobState> FollowK8sJob(const std::string& name, const KubectlOptions& options,
                                 std::chrono::milliseconds interval,
                                 std::chrono::milliseconds timeout, Clock* clock,
                                 const std::function<void(const K8sJobState&)>& on_change) {
  const Clock::TimePoint deadline = clock->Now() + timeout;
  std::string last;
  while (true) {
    REEL_ASSIGN_OR_RETURN(K8sJobState state, GetK8sJobState(name, options));
    if (const std::string now = state.Describe(); now != last) {
      on_change(state);
      last = now;
    }
    if (state.done()) return state;
    if (clock->Now() >= deadline) {
      return DeadlineExceededError("job " + name + " is still " + last);
    }
    clock->SleepFor(interval);
  }
}

}  // namespace reel::sched
