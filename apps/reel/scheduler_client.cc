#include "apps/reel/scheduler_client.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/files.h"
#include "base/subprocess.h"
#include "http/client.h"

namespace reel::cli {
namespace {

bool Healthy(const std::string& url) {
  http::ClientOptions options;
  options.timeout = std::chrono::seconds(2);
  Result<http::Client> client = http::Client::Make(url, options);
  if (!client.ok()) return false;
  Result<http::Response> r = client->Get("/healthz");
  return r.ok() && r->status == 200;
}

// The daemon serving `state`, started in the background when none answers.
Result<std::string> LocalScheduler(const std::string& state) {
  const std::string url_file = state + "/scheduler.url";
  Result<std::string> url = ReadFileToString(url_file, "scheduler address");
  if (url.ok() && Healthy(*url)) return *url;
  std::error_code error;
  std::filesystem::create_directories(state, error);
  std::filesystem::remove(url_file, error);
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) {
    return InternalError("cannot find this program to start the scheduler");
  }
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
  if (!url.empty()) return url;
  std::error_code error;
  return LocalScheduler(std::filesystem::absolute(state, error).lexically_normal().string());
}

}  // namespace reel::cli
