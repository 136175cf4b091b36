#include "serve/k8s.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>

#include "base/k8s_yaml.h"
#include "base/quantity.h"
#include "base/strings.h"

namespace reel::serve {
namespace {

// ordered_json keeps the keys in the order a person reads a manifest in (apiVersion, kind,
// metadata, spec). Names here are unique within reel_serve (a unity build batches its files).
using K8sJson = nlohmann::ordered_json;

constexpr const char* kK8sPortName = "http";
constexpr const char* kK8sContainerName = "serve";
constexpr const char* kK8sTokenVolume = "tokens";
constexpr int kK8sStartupPeriodSeconds = 5;

bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

std::string K8sQuoted(std::string_view s) { return "'" + PrintableForMessage(s) + "'"; }

// Text that goes into the YAML as it is: no control characters, valid UTF-8.
Status CheckText(std::string_view field, const std::string& value) {
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgumentError(std::string(field) + " " + K8sQuoted(value) +
                                  " holds a control character");
    }
  }
  try {
    (void)K8sJson(value).dump();  // nlohmann's strict UTF-8 check
  } catch (const nlohmann::json::exception&) {
    return InvalidArgumentError(std::string(field) + " " + K8sQuoted(value) +
                                " is not valid UTF-8");
  }
  return Status::Ok();
}

// The value of flag `name` in `args` ("--name V" or "--name=V"); `found` says whether it is there.
std::string FlagValue(const std::vector<std::string>& args, std::string_view name, bool* found) {
  *found = false;
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == name) {
      *found = true;
      value = i + 1 < args.size() ? args[i + 1] : "";
    } else if (arg.size() > name.size() && arg.substr(0, name.size()) == name &&
               arg[name.size()] == '=') {
      *found = true;
      value = std::string(arg.substr(name.size() + 1));
    }
  }
  return value;
}

bool HasFlag(const std::vector<std::string>& args, std::string_view name) {
  bool found = false;
  (void)FlagValue(args, name, &found);  // only whether it is there
  return found;
}

// The container's arguments: `args`, then --host, --port, --token-file, and --threads N for a pod
// of `millicores` unless args set it (the server's default counts the node's cores).
Result<std::vector<std::string>> ServeArgs(const K8sOptions& o, int64_t millicores) {
  for (const char* flag : {"--host", "--port", "--token-file"}) {
    if (HasFlag(o.args, flag)) {
      return InvalidArgumentError(std::string("args: ") + flag +
                                  " is set by the Kubernetes options (port, token_secret), not "
                                  "in args");
    }
  }
  std::vector<std::string> args = o.args;
  args.insert(args.end(), {"--host", "0.0.0.0", "--port", std::to_string(o.port)});
  if (!o.token_secret.empty()) {
    args.insert(args.end(),
                {"--token-file", std::string(kTokenMountPath) + "/" + o.token_secret_key});
  }
  if (!HasFlag(o.args, "--threads")) {
    bool has_instances = false;
    const std::string instances_text = FlagValue(o.args, "--instances", &has_instances);
    int64_t instances = 1;
    if (has_instances) {
      const bool whole = !instances_text.empty() && instances_text.size() <= 6 &&
                         std::all_of(instances_text.begin(), instances_text.end(), IsAsciiDigit);
      instances = whole ? std::stoll(instances_text) : 0;
      if (instances < 1) {
        return InvalidArgumentError("args: --instances " + K8sQuoted(instances_text) +
                                    " is not a positive whole number");
      }
    }
    // `reel serve` takes at most 1024 threads per instance.
    const int64_t threads = std::clamp<int64_t>(millicores / 1000 / instances, 1, 1024);
    args.insert(args.end(), {"--threads", std::to_string(threads)});
  }
  return args;
}

K8sJson ObjectMetadata(const K8sOptions& o, const K8sJson& labels) {
  return K8sMetadata(o.name, o.k8s_namespace, labels);
}

K8sJson HttpProbe(const char* path, int period_seconds, int timeout_seconds, int failures) {
  K8sJson probe = K8sJson::object();
  probe["httpGet"] = K8sJson{{"path", path}, {"port", kK8sPortName}};
  probe["periodSeconds"] = period_seconds;
  probe["timeoutSeconds"] = timeout_seconds;
  probe["failureThreshold"] = failures;
  return probe;
}

K8sJson DeploymentObject(const K8sOptions& o, const std::vector<std::string>& args,
                         const K8sJson& labels, const K8sJson& selector) {
  K8sJson container = K8sJson::object();
  container["name"] = kK8sContainerName;
  container["image"] = o.image;
  container["command"] = K8sJson::array({o.binary, "serve"});
  container["args"] = args;
  K8sJson port = K8sJson::object();
  port["name"] = kK8sPortName;
  port["containerPort"] = o.port;
  port["protocol"] = "TCP";
  container["ports"] = K8sJson::array({port});
  K8sJson env = K8sJson::array();
  const bool user_sets_wait_policy = std::any_of(
      o.env.begin(), o.env.end(), [](const auto& e) { return e.first == "OMP_WAIT_POLICY"; });
  if (!user_sets_wait_policy) {
    env.push_back(K8sJson{{"name", "OMP_WAIT_POLICY"}, {"value", "PASSIVE"}});
  }
  for (const auto& [name, value] : o.env) env.push_back(K8sJson{{"name", name}, {"value", value}});
  container["env"] = env;
  const K8sJson amounts = K8sJson{{"cpu", o.cpu}, {"memory", o.memory}};
  container["resources"] = K8sJson{{"requests", amounts}, {"limits", amounts}};
  const int startup_failures =
      (o.startup_seconds + kK8sStartupPeriodSeconds - 1) / kK8sStartupPeriodSeconds;
  container["startupProbe"] =
      HttpProbe("/v2/health/live", kK8sStartupPeriodSeconds, 2, startup_failures);
  container["readinessProbe"] = HttpProbe("/v2/health/ready", 5, 2, 2);
  container["livenessProbe"] = HttpProbe("/v2/health/live", 10, 5, 3);

  K8sJson pod = K8sJson::object();
  pod["terminationGracePeriodSeconds"] = o.termination_grace_seconds;
  K8sJson volumes = K8sJson::array();
  if (!o.token_secret.empty()) {
    K8sJson mount = K8sJson::object();
    mount["name"] = kK8sTokenVolume;
    mount["mountPath"] = kTokenMountPath;
    mount["readOnly"] = true;
    container["volumeMounts"] = K8sJson::array({mount});
    K8sJson secret = K8sJson::object();
    secret["secretName"] = o.token_secret;
    secret["items"] =
        K8sJson::array({K8sJson{{"key", o.token_secret_key}, {"path", o.token_secret_key}}});
    volumes.push_back(K8sJson{{"name", kK8sTokenVolume}, {"secret", secret}});
  }
  pod["containers"] = K8sJson::array({container});
  if (!volumes.empty()) pod["volumes"] = volumes;

  K8sJson spec = K8sJson::object();
  spec["selector"] = K8sJson{{"matchLabels", selector}};
  K8sJson rolling = K8sJson::object();
  rolling["maxSurge"] = 1;
  rolling["maxUnavailable"] = 0;
  spec["strategy"] = K8sJson{{"type", "RollingUpdate"}, {"rollingUpdate", rolling}};
  spec["template"] = K8sJson{{"metadata", K8sJson{{"labels", labels}}}, {"spec", pod}};

  K8sJson d = K8sJson::object();
  d["apiVersion"] = "apps/v1";
  d["kind"] = "Deployment";
  d["metadata"] = ObjectMetadata(o, labels);
  d["spec"] = spec;
  return d;
}

K8sJson ServiceObject(const K8sOptions& o, const K8sJson& labels, const K8sJson& selector) {
  K8sJson port = K8sJson::object();
  port["name"] = kK8sPortName;
  port["port"] = o.port;
  port["targetPort"] = kK8sPortName;
  port["protocol"] = "TCP";
  K8sJson spec = K8sJson::object();
  spec["type"] = "ClusterIP";
  spec["selector"] = selector;
  spec["ports"] = K8sJson::array({port});
  K8sJson s = K8sJson::object();
  s["apiVersion"] = "v1";
  s["kind"] = "Service";
  s["metadata"] = ObjectMetadata(o, labels);
  s["spec"] = spec;
  return s;
}

K8sJson AutoscalerObject(const K8sOptions& o, const K8sJson& labels) {
  K8sJson target = K8sJson::object();
  target["apiVersion"] = "apps/v1";
  target["kind"] = "Deployment";
  target["name"] = o.name;
  K8sJson utilization = K8sJson::object();
  utilization["type"] = "Utilization";
  utilization["averageUtilization"] = o.target_cpu_percent;
  K8sJson metric = K8sJson::object();
  metric["type"] = "Resource";
  metric["resource"] = K8sJson{{"name", "cpu"}, {"target", utilization}};
  K8sJson spec = K8sJson::object();
  spec["scaleTargetRef"] = target;
  spec["minReplicas"] = o.min_replicas;
  spec["maxReplicas"] = o.max_replicas;
  spec["metrics"] = K8sJson::array({metric});
  K8sJson h = K8sJson::object();
  h["apiVersion"] = "autoscaling/v2";
  h["kind"] = "HorizontalPodAutoscaler";
  h["metadata"] = ObjectMetadata(o, labels);
  h["spec"] = spec;
  return h;
}

K8sJson BudgetObject(const K8sOptions& o, const K8sJson& labels, const K8sJson& selector) {
  K8sJson spec = K8sJson::object();
  spec["minAvailable"] = o.min_available;
  spec["selector"] = K8sJson{{"matchLabels", selector}};
  K8sJson b = K8sJson::object();
  b["apiVersion"] = "policy/v1";
  b["kind"] = "PodDisruptionBudget";
  b["metadata"] = ObjectMetadata(o, labels);
  b["spec"] = spec;
  return b;
}

}  // namespace

Status K8sOptions::Validate() const {
  if (!IsDnsLabel(name, /*letter_first=*/true)) {
    return InvalidArgumentError("name " + K8sQuoted(name) +
                                " is not a DNS-1035 label (a-z, 0-9 and '-', starting with a "
                                "letter, ending with a letter or digit, 63 at most)");
  }
  if (!k8s_namespace.empty() && !IsDnsLabel(k8s_namespace, /*letter_first=*/false)) {
    return InvalidArgumentError("namespace " + K8sQuoted(k8s_namespace) +
                                " is not a DNS-1123 label (a-z, 0-9 and '-', 63 at most)");
  }
  if (image.empty()) return InvalidArgumentError("image is empty: name the image holding reel");
  if (std::any_of(image.begin(), image.end(), [](char c) { return c == ' ' || c == '\t'; })) {
    return InvalidArgumentError("image " + K8sQuoted(image) + " holds whitespace");
  }
  REEL_RETURN_IF_ERROR(CheckText("image", image));
  if (binary.empty()) return InvalidArgumentError("binary is empty: name reel's path in the image");
  REEL_RETURN_IF_ERROR(CheckText("binary", binary));
  if (args.empty()) return InvalidArgumentError("args is empty: name at least one model to serve");
  for (const std::string& arg : args) REEL_RETURN_IF_ERROR(CheckText("args: argument", arg));
  std::set<std::string> env_names;
  for (const auto& [env_name, value] : env) {
    const bool good =
        !env_name.empty() && !IsAsciiDigit(env_name[0]) &&
        std::all_of(env_name.begin(), env_name.end(), [](char c) {
          return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '-';
        });
    if (!good) {
      return InvalidArgumentError("env: " + K8sQuoted(env_name) +
                                  " is not an environment variable name (letters, digits, '_', "
                                  "'.', '-', not starting with a digit)");
    }
    if (!env_names.insert(env_name).second) {
      return InvalidArgumentError("env: " + K8sQuoted(env_name) + " is set twice");
    }
    REEL_RETURN_IF_ERROR(CheckText("env: " + env_name, value));
  }
  if (port < 1 || port > 65535) {
    return InvalidArgumentError("port " + std::to_string(port) + " is outside [1, 65535]");
  }
  if (min_replicas < 1) {
    return InvalidArgumentError("min_replicas " + std::to_string(min_replicas) +
                                " must be at least 1");
  }
  if (max_replicas < min_replicas) {
    return InvalidArgumentError("max_replicas " + std::to_string(max_replicas) +
                                " is below min_replicas " + std::to_string(min_replicas));
  }
  if (target_cpu_percent < 1 || target_cpu_percent > 100) {
    return InvalidArgumentError("target_cpu_percent " + std::to_string(target_cpu_percent) +
                                " is outside [1, 100] (requests equal limits)");
  }
  REEL_ASSIGN_OR_RETURN(const int64_t millicores, ParseCpuMillicores(cpu));
  if (millicores == 0) {
    return InvalidArgumentError("cpu " + K8sQuoted(cpu) + " must be at least 1m");
  }
  REEL_ASSIGN_OR_RETURN(const int64_t memory_bytes, ParseMemoryBytes(memory));
  if (memory_bytes == 0) {
    return InvalidArgumentError("memory " + K8sQuoted(memory) + " must be above 0");
  }
  if (min_available < 0 || min_available > min_replicas) {
    return InvalidArgumentError("min_available " + std::to_string(min_available) +
                                " is outside [0, min_replicas " + std::to_string(min_replicas) +
                                "]");
  }
  if (!token_secret.empty()) {
    if (!IsDnsSubdomain(token_secret)) {
      return InvalidArgumentError("token_secret " + K8sQuoted(token_secret) +
                                  " is not a Secret name (a DNS-1123 subdomain)");
    }
    const bool good_key =
        !token_secret_key.empty() && token_secret_key.size() <= 253 && token_secret_key != "." &&
        token_secret_key != ".." &&
        std::all_of(token_secret_key.begin(), token_secret_key.end(), [](char c) {
          return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '-';
        });
    if (!good_key) {
      return InvalidArgumentError("token_secret_key " + K8sQuoted(token_secret_key) +
                                  " is not a Secret key (letters, digits, '_', '.', '-')");
    }
  }
  if (termination_grace_seconds < 1) {
    return InvalidArgumentError("termination_grace_seconds " +
                                std::to_string(termination_grace_seconds) + " must be at least 1");
  }
  if (startup_seconds < kK8sStartupPeriodSeconds) {
    return InvalidArgumentError("startup_seconds " + std::to_string(startup_seconds) +
                                " must be at least " + std::to_string(kK8sStartupPeriodSeconds));
  }
  return ServeArgs(*this, millicores).status();  // flags in args that EmitK8s sets or reads
}

Result<std::string> EmitK8s(const K8sOptions& options) {
  REEL_RETURN_IF_ERROR(options.Validate());
  REEL_ASSIGN_OR_RETURN(const int64_t millicores, ParseCpuMillicores(options.cpu));
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> args, ServeArgs(options, millicores));
  K8sJson selector = K8sJson::object();
  selector["app.kubernetes.io/name"] = "reel";
  selector["app.kubernetes.io/instance"] = options.name;
  K8sJson labels = selector;
  labels["app.kubernetes.io/component"] = "serve";

  return K8sManifests({DeploymentObject(options, args, labels, selector),
                       ServiceObject(options, labels, selector), AutoscalerObject(options, labels),
                       BudgetObject(options, labels, selector)});
}

}  // namespace reel::serve
