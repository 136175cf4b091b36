// on_success / on_failure: a command with the run in its environment, or a JSON POST to a URL.
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "http/client.h"
#include "sched/executor.h"
#include "sched/runner_internal.h"

namespace reel::sched::internal {
namespace {

Status RunCommandHook(const std::vector<std::string>& command, const RunRecord& run,
                      const std::string& log_path) {
  REEL_ASSIGN_OR_RETURN(std::string program, ResolveProgram(command[0], ""));
  std::vector<std::string> argv = command;
  argv[0] = program;
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log.valid()) return NotFoundError("hook log " + log_path + ": " + std::strerror(errno));
  SpawnOptions options;
  options.stdout_fd = log.get();
  options.stderr_fd = log.get();
  options.workdir = run.workdir;
  const std::vector<std::string> env =
      CurrentEnvironment({"REEL_RUN_ID=" + run.id, "REEL_PIPELINE=" + run.pipeline,
                          "REEL_RUN_STATE=" + std::string(RunStateName(run.state)),
                          "REEL_FAILED_TASK=" + run.failed_task});
  REEL_ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(argv, env, options));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const ProcessEnd end = DecodeWaitStatus(status);
  if (end.exit_code == 0) return Status::Ok();
  return InternalError("hook " + command[0] + " failed (" +
                       ExitText(Exit{pid, end.exit_code, end.signal}) + "); its output is in " +
                       log_path);
}

Status PostHook(const std::string& url, const RunRecord& run) {
  // http::Client takes the server and the path apart: "http://host:port" and "/path?query".
  const size_t path_at = url.find('/', url.find("://") + 3);
  const std::string server = url.substr(0, path_at);
  const std::string target = path_at == std::string::npos ? "/" : url.substr(path_at);
  http::ClientOptions options;
  options.timeout = std::chrono::seconds(10);
  REEL_ASSIGN_OR_RETURN(http::Client client, http::Client::Make(server, options));
  nlohmann::json body = {{"run", run.id},
                         {"pipeline", run.pipeline},
                         {"state", std::string(RunStateName(run.state))},
                         {"failed_task", run.failed_task}};
  REEL_ASSIGN_OR_RETURN(
      http::Response response,
      client.Post(target, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  if (response.status / 100 == 2) return Status::Ok();
  return UnavailableError("webhook " + url + " answered HTTP " + std::to_string(response.status));
}

}  // namespace

Status RunHook(const Hook& hook, const RunRecord& run, const std::string& log_path) {
  if (!hook.command.empty()) return RunCommandHook(hook.command, run, log_path);
  return PostHook(hook.url, run);
}

}  // namespace reel::sched::internal
