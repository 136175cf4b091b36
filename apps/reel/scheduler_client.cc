#include "apps/reel/scheduler_client.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/files.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "http/client.h"

namespace reel::cli {
namespace {

// The daemon's /healthz answer; null when it does not answer.
nlohmann::json Health(const std::string& url) {
  http::ClientOptions options;
  options.timeout = std::chrono::seconds(2);
  Result<http::Client> client = http::Client::Make(url, options);
  if (!client.ok()) return nullptr;
  Result<nlohmann::json> health = client->JsonCall("GET", "/healthz", nullptr);
  return health.ok() && health->is_object() ? *health : nullptr;
}

bool Healthy(const std::string& url) { return !Health(url).is_null(); }

// Of several daemons sharing a database, the one leading; waits out a takeover (a lease's
// length) before giving up.
Result<std::string> Leader(const std::vector<std::string>& urls) {
  for (int round = 0; round < 150; ++round) {
    for (const std::string& url : urls) {
      const nlohmann::json health = Health(url);
      if (health.is_object() && health.value("role", "leader") == "leader") return url;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return UnavailableError("none of the schedulers " + JoinStrings(urls, ", ") +
                          " leads (all down or standing by)");
}

// The daemon serving `state`, started in the background when none answers.
Result<std::string> LocalScheduler(const std::string& state) {
  const std::string url_file = state + "/scheduler.url";
  Result<std::string> url = ReadFileToString(url_file, "scheduler address");
  if (url.ok() && Healthy(*url)) return *url;
  std::error_code error;
  std::filesystem::create_directories(state, error);
  std::filesystem::remove(url_file, error);
  REEL_ASSIGN_OR_RETURN(std::string self, ThisProgram());
  const std::string log = state + "/scheduler.log";
  FILE* out = std::fopen(log.c_str(), "a");
  if (out == nullptr) return UnavailableError("cannot write " + log);
  SpawnOptions options;
  options.die_with_parent = false;
  options.stdout_fd = fileno(out);
  options.stderr_fd = fileno(out);
  Result<pid_t> pid = SpawnProcess({self, "scheduler", "serve", "--state", state, "--port", "0"},
                                   CurrentEnvironment(), options);
  std::fclose(out);
  REEL_RETURN_IF_ERROR(pid.status());
  for (int i = 0; i < 300; ++i) {
    url = ReadFileToString(url_file, "scheduler address");
    if (url.ok() && Healthy(*url)) return *url;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return UnavailableError("the scheduler started for " + state + " did not answer; see " + log);
}

}  // namespace

Result<std::string> SchedulerUrl(const std::string& url, const std::string& state) {
  if (url.find(',') != std::string::npos) return Leader(SplitString(url, ','));
  if (!url.empty()) return url;
  std::error_code error;
  return LocalScheduler(std::filesystem::absolute(state, error).lexically_normal().string());
}

}  // namespace reel::cli
