// Prints EmitK8s's YAML for one of two fixed option sets, for k8s_validate_test.sh to validate
// against the Kubernetes API schema (tools/k8s-validate). Tests only.
//   k8s_emit_tool minimal   an image and one model, every other option at its default
//   k8s_emit_tool full      a namespace, autoscaling 2..8, a token Secret, environment, millicores,
//                           and arguments that look like numbers and booleans
// Exit codes: 0, 3 for a bad scenario or options EmitK8s refuses.
#include <cstdio>
#include <string>

#include "serve/k8s.h"

int main(int argc, char** argv) {
  const std::string scenario = argc == 2 ? argv[1] : "";
  reel::serve::K8sOptions o;
  o.image = "registry.example.com/reel:1.0";
  o.args = {"models:/synthetic@production"};
  if (scenario == "full") {
    o.name = "classify";
    o.k8s_namespace = "ml-prod";
    o.binary = "/usr/local/bin/reel";
    o.args = {"video=models:/synthetic@production",
              "--max-batch",
              "8",
              "--instances",
              "2",
              "--max-delay-us",
              "2000",
              "--registry",
              "http://registry.ml-prod:8080",
              "--allow-uri-prefix",
              "s3://videos/",
              "--preferred-batch",
              "4"};
    o.env = {{"REEL_REGISTRY_URI", "http://registry.ml-prod:8080"},
             {"AWS_REGION", "us-east-1"},
             {"REEL_DEBUG", "yes"}};
    o.port = 8080;
    o.min_replicas = 2;
    o.max_replicas = 8;
    o.target_cpu_percent = 65;
    o.cpu = "3500m";
    o.memory = "6Gi";
    o.min_available = 1;
    o.token_secret = "reel-serve-tokens";
    o.token_secret_key = "tokens.txt";
    o.termination_grace_seconds = 45;
    o.startup_seconds = 600;
  } else if (scenario != "minimal") {
    std::fprintf(stderr, "usage: k8s_emit_tool minimal|full\n");
    return 3;
  }
  const reel::Result<std::string> yaml = reel::serve::EmitK8s(o);
  if (!yaml.ok()) {
    std::fprintf(stderr, "k8s_emit_tool: %s\n", yaml.status().ToString().c_str());
    return 3;
  }
  std::fputs(yaml->c_str(), stdout);
  return 0;
}
