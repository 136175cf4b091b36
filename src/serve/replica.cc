#include "serve/replica.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "base/subprocess.h"
#include "base/unique_fd.h"

namespace reel::serve {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string ExitText(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

class ProcessReplica : public Replica {
 public:
  ProcessReplica(pid_t pid, std::string url, UniqueFd output)
      : pid_(pid), url_(std::move(url)), copier_([fd = std::move(output)] { CopyToStderr(fd); }) {}
  ~ProcessReplica() override {
    Stop(std::chrono::milliseconds(5000));
    copier_.join();  // the pipe ends when the process does
  }

  const std::string& url() const override { return url_; }
  std::string name() const override { return "pid " + std::to_string(pid_); }

  bool Alive() override {
    std::lock_guard lock(mu_);
    return Reap(WNOHANG);
  }

  void Stop(std::chrono::milliseconds grace) override {
    std::lock_guard lock(mu_);
    if (!Reap(WNOHANG)) return;
    kill(pid_, SIGTERM);
    const auto deadline = SteadyClock::now() + grace;
    while (Reap(WNOHANG)) {
      if (SteadyClock::now() >= deadline) {
        kill(pid_, SIGKILL);
        Reap(0);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  // True while the process runs; `flags` 0 waits for it to end.
  bool Reap(int flags) {
    if (exited_) return false;
    int status = 0;
    if (waitpid(pid_, &status, flags) == pid_) exited_ = true;
    return !exited_;
  }

  static void CopyToStderr(const UniqueFd& fd) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0 && write(STDERR_FILENO, buf, static_cast<size_t>(n)) < 0) break;
    }
  }

  const pid_t pid_;
  const std::string url_;
  std::mutex mu_;
  bool exited_ = false;  // guarded by mu_
  std::thread copier_;
};

// Reads up to the first '\n' of `fd` before `deadline`; "" on EOF or timeout.
std::string FirstLine(int fd, SteadyClock::time_point deadline) {
  std::string line;
  char c;
  while (SteadyClock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    const int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') return n <= 0 ? "" : line;
    line += c;
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<Replica>> StartProcessReplica(const std::vector<std::string>& argv,
                                                     std::chrono::milliseconds start_timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe for a replica");
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  SpawnOptions options;
  options.stdout_fd = write_end.get();
  REEL_ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(argv, CurrentEnvironment(), options));
  write_end.reset();  // the child holds the only write end now: EOF when it exits
  const std::string line = FirstLine(read_end.get(), SteadyClock::now() + start_timeout);
  constexpr std::string_view kPrefix = "listening on ";
  if (line.rfind(kPrefix, 0) != 0) {
    int status = 0;
    const bool exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    const std::string who = "a replica (pid " + std::to_string(pid) + ") ";
    return UnavailableError(who + (exited ? ExitText(status) + " before it listened"
                                          : "printed no 'listening on' line within " +
                                                std::to_string(start_timeout.count()) + " ms"));
  }
  return std::unique_ptr<Replica>(
      new ProcessReplica(pid, line.substr(kPrefix.size()), std::move(read_end)));
}

}  // namespace reel::serve
