// Test support: points the AWS_* variables at the Ceph cluster that scripts/ceph-cluster.sh
// started for this build (ctest's "ceph" fixture writes BUILD/ceph/env), so tests and
// benchmarks talk to a real radosgw. Header-only; for tests and benchmarks only.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace reel::storage::testing {

// Directory of the running cluster, or "" when none was started.
inline std::string CephDirectory() {
  if (const char* dir = std::getenv("REEL_CEPH_DIR")) return dir;
  const char* build = std::getenv("REEL_BINARY_DIR");
  return build ? std::string(build) + "/ceph" : "";
}

inline std::string CephScript() {
  const char* source = std::getenv("REEL_SOURCE_DIR");
  return std::string(source ? source : ".") + "/scripts/ceph-cluster.sh";
}

// Reads DIR/env ("export NAME=value" lines) into the environment. False when it is missing.
inline bool LoadCephEnvironment() {
  std::ifstream in(CephDirectory() + "/env");
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("export ", 0) == 0) line = line.substr(7);
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) {
      value = value.substr(1, value.size() - 2);
    }
    ::setenv(line.substr(0, eq).c_str(), value.c_str(), 1);
  }
  return true;
}

// Runs `ceph-cluster.sh VERB DIR` (stop-rgw, start-rgw); returns its exit status.
inline int CephControl(const std::string& verb) {
  std::string command =
      "bash '" + CephScript() + "' " + verb + " '" + CephDirectory() + "' >/dev/null";
  return std::system(command.c_str());
}

}  // namespace reel::storage::testing
