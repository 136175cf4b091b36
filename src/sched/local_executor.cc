// LocalExecutor: one waiter thread per process blocks in waitpid and queues the exit; Wait takes
// exits off the queue and sends the SIGKILLs whose grace has run out.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "sched/executor.h"

namespace reel::sched {
namespace {

using SteadyClock = std::chrono::steady_clock;

class LocalExecutor : public Executor {
 public:
  ~LocalExecutor() override {
    std::map<int64_t, Child> children;
    {
      std::lock_guard<std::mutex> lock(mu_);
      children.swap(children_);
    }
    for (auto& [pid, child] : children) {
      ::kill(-static_cast<pid_t>(pid), SIGKILL);
      child.waiter.join();
    }
  }

  Result<int64_t> Start(const Launch& launch) override {
    UniqueFd log(::open(launch.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!log.valid()) {
      return NotFoundError("task " + launch.task + ": cannot open its log " + launch.log_path +
                           ": " + std::strerror(errno));
    }
    SpawnOptions options;
    options.stdout_fd = log.get();
    options.stderr_fd = log.get();
    options.new_process_group = true;
    options.workdir = launch.workdir;
    REEL_ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(launch.argv, launch.env, options));
    std::lock_guard<std::mutex> lock(mu_);
    Child& child = children_[pid];
    child.waiter = std::thread([this, pid] { Reap(pid); });
    return static_cast<int64_t>(pid);
  }

  void Terminate(int64_t id, std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = children_.find(id);
    if (it == children_.end() || it->second.kill_at) return;
    ::kill(-static_cast<pid_t>(id), SIGTERM);
    it->second.kill_at = SteadyClock::now() + grace;
  }

  std::optional<Exit> Wait(Clock::TimePoint deadline) override {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      const Clock::TimePoint next_kill = KillOverdue();
      if (!exits_.empty()) {
        Exit exit = exits_.front();
        exits_.pop_front();
        const auto it = children_.find(exit.id);
        std::thread waiter = std::move(it->second.waiter);
        children_.erase(it);
        lock.unlock();
        waiter.join();  // it has queued the exit: returns at once
        return exit;
      }
      if (SteadyClock::now() >= deadline) return std::nullopt;
      changed_.wait_until(lock, std::min(deadline, next_kill));
    }
  }

  size_t running() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return children_.size();
  }

 private:
  struct Child {
    std::thread waiter;
    std::optional<Clock::TimePoint> kill_at;
  };

  // Sends SIGKILL to groups whose grace ran out; returns when the next one is due. Holds mu_.
  Clock::TimePoint KillOverdue() {
    const Clock::TimePoint now = SteadyClock::now();
    Clock::TimePoint next = Clock::TimePoint::max();
    for (auto& [pid, child] : children_) {
      if (!child.kill_at) continue;
      if (*child.kill_at <= now) {
        ::kill(-static_cast<pid_t>(pid), SIGKILL);
        child.kill_at = Clock::TimePoint::max();  // sent; the exit follows
      } else {
        next = std::min(next, *child.kill_at);
      }
    }
    return next;
  }

  void Reap(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    // Whatever the task left running in its group goes with it (the group outlives its leader
    // while members remain, so the id cannot name another process yet).
    ::kill(-pid, SIGKILL);
    const ProcessEnd end = DecodeWaitStatus(status);
    const Exit exit{pid, end.exit_code, end.signal};
    std::lock_guard<std::mutex> lock(mu_);
    exits_.push_back(exit);
    changed_.notify_all();
  }

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<int64_t, Child> children_;
  std::deque<Exit> exits_;
};

}  // namespace

std::string ExitText(const Exit& exit) {
  if (exit.signal == 0) return "exit " + std::to_string(exit.exit_code);
  const char* name = sigabbrev_np(exit.signal);
  return std::string("killed by ") +
         (name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(exit.signal));
}

std::unique_ptr<Executor> MakeLocalExecutor() { return std::make_unique<LocalExecutor>(); }

}  // namespace reel::sched
