#include "serve/k8s.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace reel::serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

K8sOptions MinimalK8s() {
  K8sOptions o;
  o.image = "registry.example.com/reel:1.0";
  o.args = {"models:/synthetic@production"};
  return o;
}

std::vector<YAML::Node> K8sDocuments(const K8sOptions& o) {
  Result<std::string> yaml = EmitK8s(o);
  EXPECT_OK(yaml);
  if (!yaml.ok()) return {};
  return YAML::LoadAll(*yaml);
}

std::map<std::string, std::string> StringMap(const YAML::Node& node) {
  return node.as<std::map<std::string, std::string>>();
}

std::vector<std::string> Strings(const YAML::Node& node) {
  return node.as<std::vector<std::string>>();
}

YAML::Node ServeContainer(const YAML::Node& deployment) {
  const YAML::Node containers = deployment["spec"]["template"]["spec"]["containers"];
  EXPECT_EQ(containers.size(), 1u);
  return containers[0];
}

TEST(EmitK8s, FourObjectsWithOneSetOfLabelsAndMatchingSelectors) {
  const std::vector<YAML::Node> docs = K8sDocuments(MinimalK8s());
  ASSERT_EQ(docs.size(), 4u);
  std::vector<std::string> kinds;
  for (const YAML::Node& d : docs) {
    kinds.push_back(d["apiVersion"].as<std::string>() + " " + d["kind"].as<std::string>());
    EXPECT_EQ(d["metadata"]["name"].as<std::string>(), "reel-serve");
    EXPECT_FALSE(d["metadata"]["namespace"]);
  }
  EXPECT_THAT(kinds, ElementsAre("apps/v1 Deployment", "v1 Service",
                                 "autoscaling/v2 HorizontalPodAutoscaler",
                                 "policy/v1 PodDisruptionBudget"));
  const std::map<std::string, std::string> labels = StringMap(docs[0]["metadata"]["labels"]);
  for (const YAML::Node& d : docs) EXPECT_EQ(StringMap(d["metadata"]["labels"]), labels);
  EXPECT_EQ(StringMap(docs[0]["spec"]["template"]["metadata"]["labels"]), labels);

  const std::map<std::string, std::string> selector =
      StringMap(docs[0]["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(selector,
            (std::map<std::string, std::string>{{"app.kubernetes.io/instance", "reel-serve"},
                                                {"app.kubernetes.io/name", "reel"}}));
  for (const auto& [key, value] : selector) EXPECT_EQ(labels.at(key), value) << key;
  EXPECT_EQ(StringMap(docs[1]["spec"]["selector"]), selector);
  EXPECT_EQ(StringMap(docs[3]["spec"]["selector"]["matchLabels"]), selector);
}

TEST(EmitK8s, ProbesAskTheV2HealthPathsOnTheServedPort) {
  K8sOptions o = MinimalK8s();
  o.port = 9000;
  o.startup_seconds = 120;
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  const YAML::Node c = ServeContainer(docs[0]);
  ASSERT_EQ(c["ports"].size(), 1u);
  EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "http");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 9000);
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/v2/health/ready");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"].as<std::string>(), "http");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/v2/health/live");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"].as<std::string>(), "http");
  EXPECT_EQ(c["startupProbe"]["httpGet"]["path"].as<std::string>(), "/v2/health/live");
  EXPECT_GE(c["startupProbe"]["periodSeconds"].as<int>() *
                c["startupProbe"]["failureThreshold"].as<int>(),
            120);
  // The server drains for up to 10 s after SIGTERM.
  EXPECT_GT(docs[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as<int>(), 10);

  const YAML::Node port = docs[1]["spec"]["ports"][0];
  EXPECT_EQ(port["port"].as<int>(), 9000);
  EXPECT_EQ(port["targetPort"].as<std::string>(), "http");
}

TEST(EmitK8s, ContainerRunsReelServeOnAllAddressesWithThreadsForItsCpu) {
  K8sOptions o = MinimalK8s();
  o.args = {"models:/a@production", "--instances", "2", "--max-batch", "8"};
  o.cpu = "4";
  o.memory = "6Gi";
  o.port = 8080;
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  const YAML::Node c = ServeContainer(docs[0]);
  EXPECT_EQ(c["image"].as<std::string>(), "registry.example.com/reel:1.0");
  EXPECT_THAT(Strings(c["command"]), ElementsAre("reel", "serve"));
  EXPECT_THAT(Strings(c["args"]),
              ElementsAre("models:/a@production", "--instances", "2", "--max-batch", "8", "--host",
                          "0.0.0.0", "--port", "8080", "--threads", "2"));
  for (const char* kind : {"requests", "limits"}) {
    EXPECT_EQ(StringMap(c["resources"][kind]),
              (std::map<std::string, std::string>{{"cpu", "4"}, {"memory", "6Gi"}}))
        << kind;
  }
  ASSERT_TRUE(c["env"].IsSequence());
  EXPECT_EQ(c["env"][0]["name"].as<std::string>(), "OMP_WAIT_POLICY");
  EXPECT_EQ(c["env"][0]["value"].as<std::string>(), "PASSIVE");
  EXPECT_FALSE(c["volumeMounts"]);
}

TEST(EmitK8s, ThreadsFromTheCpuUnlessArgsSetThem) {
  const auto args_for = [](const std::string& cpu, std::vector<std::string> args) {
    K8sOptions o = MinimalK8s();
    o.cpu = cpu;
    o.args = std::move(args);
    const std::vector<YAML::Node> docs = K8sDocuments(o);
    return docs.empty() ? std::vector<std::string>() : Strings(ServeContainer(docs[0])["args"]);
  };
  EXPECT_THAT(args_for("500m", {"m"}),
              ElementsAre("m", "--host", "0.0.0.0", "--port", "8000", "--threads", "1"));
  EXPECT_THAT(
      args_for("3500m", {"m", "--instances=3"}),
      ElementsAre("m", "--instances=3", "--host", "0.0.0.0", "--port", "8000", "--threads", "1"));
  EXPECT_THAT(args_for("8", {"m", "--threads", "3"}),
              ElementsAre("m", "--threads", "3", "--host", "0.0.0.0", "--port", "8000"));
  EXPECT_THAT(args_for("8", {"m", "--threads=5"}),
              ElementsAre("m", "--threads=5", "--host", "0.0.0.0", "--port", "8000"));
}

TEST(EmitK8s, AutoscalerOwnsTheReplicaCount) {
  K8sOptions o = MinimalK8s();
  o.min_replicas = 2;
  o.max_replicas = 10;
  o.target_cpu_percent = 60;
  o.min_available = 1;
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_FALSE(docs[0]["spec"]["replicas"]);  // a re-apply must not reset the autoscaler's count
  const YAML::Node hpa = docs[2]["spec"];
  EXPECT_EQ(hpa["minReplicas"].as<int>(), 2);
  EXPECT_EQ(hpa["maxReplicas"].as<int>(), 10);
  EXPECT_EQ(StringMap(hpa["scaleTargetRef"]),
            (std::map<std::string, std::string>{
                {"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "reel-serve"}}));
  ASSERT_EQ(hpa["metrics"].size(), 1u);
  EXPECT_EQ(hpa["metrics"][0]["type"].as<std::string>(), "Resource");
  EXPECT_EQ(hpa["metrics"][0]["resource"]["name"].as<std::string>(), "cpu");
  EXPECT_EQ(hpa["metrics"][0]["resource"]["target"]["type"].as<std::string>(), "Utilization");
  EXPECT_EQ(hpa["metrics"][0]["resource"]["target"]["averageUtilization"].as<int>(), 60);
  EXPECT_EQ(docs[3]["spec"]["minAvailable"].as<int>(), 1);
  // Rolling updates add a pod before they take one away.
  EXPECT_EQ(docs[0]["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"].as<int>(), 0);
}

TEST(EmitK8s, TokenSecretIsMountedAndPassedAsTokenFile) {
  K8sOptions o = MinimalK8s();
  o.token_secret = "reel-tokens";
  o.token_secret_key = "tokens.txt";
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  const YAML::Node c = ServeContainer(docs[0]);
  const std::vector<std::string> args = Strings(c["args"]);
  const std::string file = std::string(kTokenMountPath) + "/tokens.txt";
  EXPECT_THAT(args, ::testing::Contains("--token-file"));
  auto flag = std::find(args.begin(), args.end(), "--token-file");
  ASSERT_NE(flag + 1, args.end());
  EXPECT_EQ(*(flag + 1), file);
  ASSERT_EQ(c["volumeMounts"].size(), 1u);
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), kTokenMountPath);
  EXPECT_TRUE(c["volumeMounts"][0]["readOnly"].as<bool>());
  const YAML::Node volumes = docs[0]["spec"]["template"]["spec"]["volumes"];
  ASSERT_EQ(volumes.size(), 1u);
  EXPECT_EQ(volumes[0]["name"].as<std::string>(), c["volumeMounts"][0]["name"].as<std::string>());
  EXPECT_EQ(volumes[0]["secret"]["secretName"].as<std::string>(), "reel-tokens");
  EXPECT_EQ(volumes[0]["secret"]["items"][0]["key"].as<std::string>(), "tokens.txt");
}

TEST(EmitK8s, NamespaceAndEnvironment) {
  K8sOptions o = MinimalK8s();
  o.name = "classify";
  o.k8s_namespace = "ml-prod";
  o.env = {{"REEL_REGISTRY_URI", "http://registry:8080"}, {"OMP_WAIT_POLICY", "ACTIVE"}};
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  for (const YAML::Node& d : docs) {
    EXPECT_EQ(d["metadata"]["name"].as<std::string>(), "classify");
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "ml-prod");
    EXPECT_EQ(d["metadata"]["labels"]["app.kubernetes.io/instance"].as<std::string>(), "classify");
  }
  EXPECT_EQ(docs[2]["spec"]["scaleTargetRef"]["name"].as<std::string>(), "classify");
  const YAML::Node env = ServeContainer(docs[0])["env"];
  ASSERT_EQ(env.size(), 2u);  // the caller's OMP_WAIT_POLICY replaces the default
  EXPECT_EQ(env[0]["name"].as<std::string>(), "REEL_REGISTRY_URI");
  EXPECT_EQ(env[0]["value"].as<std::string>(), "http://registry:8080");
  EXPECT_EQ(env[1]["name"].as<std::string>(), "OMP_WAIT_POLICY");
  EXPECT_EQ(env[1]["value"].as<std::string>(), "ACTIVE");
}

// Strings that YAML would read as numbers, booleans or null are quoted; odd characters survive.
TEST(EmitK8s, StringsStayStrings) {
  K8sOptions o = MinimalK8s();
  const std::vector<std::string> tricky = {
      "8",   "yes", "No",      "null", "~",   "1e3",  "0x1F", "-1", "a: b", "#c", "'q'", "\"d\"",
      "--x", "",    "ünïcode", "[1]",  "{a}", ".inf", "*ref", "&a", "!tag", "%p", "@a",  "a\\b"};
  o.args = tricky;
  o.cpu = "2";
  const std::vector<YAML::Node> docs = K8sDocuments(o);
  ASSERT_EQ(docs.size(), 4u);
  const YAML::Node args = ServeContainer(docs[0])["args"];
  ASSERT_GE(args.size(), tricky.size());
  for (size_t i = 0; i < tricky.size(); ++i) {
    EXPECT_EQ(args[i].as<std::string>(), tricky[i]);
    EXPECT_EQ(args[i].Tag(), "!") << tricky[i] << " is not quoted";
  }
  // Quantities are strings too (Kubernetes takes "2" and 2, but a string is what a person wrote).
  EXPECT_EQ(ServeContainer(docs[0])["resources"]["limits"]["cpu"].Tag(), "!");
  EXPECT_EQ(ServeContainer(docs[0])["ports"][0]["containerPort"].Tag(), "?");  // a number
}

TEST(EmitK8s, EachDocumentStartsWithItsMarker) {
  ASSERT_OK_AND_ASSIGN(std::string yaml, EmitK8s(MinimalK8s()));
  EXPECT_EQ(yaml.rfind("---\napiVersion: apps/v1\nkind: Deployment\n", 0), 0u) << yaml;
  EXPECT_THAT(yaml, HasSubstr("\n---\napiVersion: v1\nkind: Service\n"));
  EXPECT_THAT(yaml, HasSubstr("\n---\napiVersion: autoscaling/v2\n"));
  EXPECT_THAT(yaml, HasSubstr("\n---\napiVersion: policy/v1\n"));
  EXPECT_EQ(yaml.back(), '\n');
}

TEST(EmitK8s, BadOptionsAreInvalidArgumentNamingTheField) {
  struct Case {
    std::string what;
    std::function<void(K8sOptions*)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"upper case name", [](K8sOptions* o) { o->name = "Reel"; }, "name 'Reel'"},
      {"name starting with a digit", [](K8sOptions* o) { o->name = "1reel"; }, "DNS-1035"},
      {"name ending with '-'", [](K8sOptions* o) { o->name = "reel-"; }, "DNS-1035"},
      {"name with a dot", [](K8sOptions* o) { o->name = "reel.serve"; }, "DNS-1035"},
      {"long name", [](K8sOptions* o) { o->name = std::string(64, 'a'); }, "63 at most"},
      {"empty name", [](K8sOptions* o) { o->name = ""; }, "name ''"},
      {"bad namespace", [](K8sOptions* o) { o->k8s_namespace = "ML"; }, "namespace 'ML'"},
      {"empty image", [](K8sOptions* o) { o->image = ""; }, "image is empty"},
      {"image with a space", [](K8sOptions* o) { o->image = "reel 1"; }, "image 'reel 1'"},
      {"empty binary", [](K8sOptions* o) { o->binary = ""; }, "binary"},
      {"no args", [](K8sOptions* o) { o->args.clear(); }, "args is empty"},
      {"--port in args", [](K8sOptions* o) { o->args.push_back("--port"); }, "--port"},
      {"--port= in args", [](K8sOptions* o) { o->args.push_back("--port=1"); }, "--port"},
      {"--host in args", [](K8sOptions* o) { o->args.push_back("--host"); }, "--host"},
      {"--token-file in args", [](K8sOptions* o) { o->args.push_back("--token-file=t"); },
       "--token-file"},
      {"bad --instances",
       [](K8sOptions* o) {
         o->args.insert(o->args.end(), {"--instances", "x"});
       },
       "--instances 'x'"},
      {"control character", [](K8sOptions* o) { o->args.push_back("a\nb"); }, "control character"},
      {"invalid UTF-8", [](K8sOptions* o) { o->args.push_back("\xff"); }, "UTF-8"},
      {"port 0", [](K8sOptions* o) { o->port = 0; }, "port 0 is outside [1, 65535]"},
      {"port 65536", [](K8sOptions* o) { o->port = 65536; }, "port 65536"},
      {"min_replicas 0", [](K8sOptions* o) { o->min_replicas = 0; }, "min_replicas 0"},
      {"min above max",
       [](K8sOptions* o) {
         o->min_replicas = 3;
         o->max_replicas = 2;
       },
       "max_replicas 2 is below min_replicas 3"},
      {"cpu percent 0", [](K8sOptions* o) { o->target_cpu_percent = 0; }, "target_cpu_percent"},
      {"cpu percent 101", [](K8sOptions* o) { o->target_cpu_percent = 101; }, "target_cpu_percent"},
      {"cpu a word", [](K8sOptions* o) { o->cpu = "two"; }, "cpu 'two'"},
      {"cpu with Gi", [](K8sOptions* o) { o->cpu = "2Gi"; }, "cpu '2Gi'"},
      {"cpu negative", [](K8sOptions* o) { o->cpu = "-1"; }, "cpu '-1'"},
      {"cpu zero", [](K8sOptions* o) { o->cpu = "0"; }, "at least 1m"},
      {"cpu below 1m", [](K8sOptions* o) { o->cpu = "0.0001"; }, "at least 1m"},
      {"memory in millibytes", [](K8sOptions* o) { o->memory = "512m"; }, "Mi or M is meant"},
      {"memory a word", [](K8sOptions* o) { o->memory = "lots"; }, "memory 'lots'"},
      {"memory unit only", [](K8sOptions* o) { o->memory = "Gi"; }, "memory 'Gi'"},
      {"memory zero", [](K8sOptions* o) { o->memory = "0Gi"; }, "above 0"},
      {"min_available negative", [](K8sOptions* o) { o->min_available = -1; }, "min_available"},
      {"min_available above min_replicas", [](K8sOptions* o) { o->min_available = 2; },
       "min_available 2 is outside [0, min_replicas 1]"},
      {"bad secret", [](K8sOptions* o) { o->token_secret = "Tokens_1"; },
       "token_secret 'Tokens_1'"},
      {"bad secret key",
       [](K8sOptions* o) {
         o->token_secret = "tokens";
         o->token_secret_key = "a/b";
       },
       "token_secret_key 'a/b'"},
      {"bad env name",
       [](K8sOptions* o) {
         o->env = {{"1X", "v"}};
       },
       "env: '1X'"},
      {"env set twice",
       [](K8sOptions* o) {
         o->env = {{"A", "1"}, {"A", "2"}};
       },
       "set twice"},
      {"grace 0", [](K8sOptions* o) { o->termination_grace_seconds = 0; },
       "termination_grace_seconds"},
      {"startup 1", [](K8sOptions* o) { o->startup_seconds = 1; }, "startup_seconds"},
  };
  for (const Case& c : cases) {
    K8sOptions o = MinimalK8s();
    c.change(&o);
    const Result<std::string> yaml = EmitK8s(o);
    EXPECT_STATUS(yaml, StatusCode::kInvalidArgument) << c.what;
    if (!yaml.ok()) {
      EXPECT_THAT(yaml.status().message(), HasSubstr(c.message)) << c.what;
    }
  }
}

TEST(EmitK8s, GoodQuantities) {
  for (const char* cpu : {"1", "0.5", ".5", "1.", "250m", "1500m", "64"}) {
    K8sOptions o = MinimalK8s();
    o.cpu = cpu;
    EXPECT_OK(EmitK8s(o)) << cpu;
  }
  for (const char* memory : {"4Gi", "512Mi", "1G", "500M", "1073741824", "1.5Gi", "100k", "1Ti"}) {
    K8sOptions o = MinimalK8s();
    o.memory = memory;
    EXPECT_OK(EmitK8s(o)) << memory;
  }
}

}  // namespace
}  // namespace reel::serve
