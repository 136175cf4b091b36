// What every Kubernetes object Reel writes needs: the name rules of the API server and one YAML
// writer for manifests (`kubectl apply -f -`), shared by `reel serve --emit-k8s` and the job
// scheduler's Kubernetes executor.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel {

// RFC 1123 label (a-z0-9 and '-', alphanumeric at both ends, 63 at most); `letter_first` makes it
// the RFC 1035 label Kubernetes wants for Service names.
bool IsDnsLabel(std::string_view s, bool letter_first);
// RFC 1123 subdomain: dot-separated labels, 253 at most (Secret names).
bool IsDnsSubdomain(std::string_view s);

// An object's metadata: its name, its namespace unless empty, its labels.
nlohmann::ordered_json K8sMetadata(const std::string& name, const std::string& k8s_namespace,
                                   const nlohmann::ordered_json& labels);

// The objects as one multi-document YAML text ("---" before each), keys in the objects' order,
// strings quoted where YAML would read them back as something else (numbers, yes/no, null).
// Errors: Internal when the emitter fails.
Result<std::string> K8sManifests(const std::vector<nlohmann::ordered_json>& objects);

}  // namespace reel
