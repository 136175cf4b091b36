#include "parallel/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "base/logging.h"
#include "base/stop_request.h"
#include "base/subprocess.h"

namespace reel::parallel {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};

void OnStopSignal(int signal) { g_stop_signal = signal; }

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

// The environment of one worker: ours, with the variables the launcher sets replaced.
std::vector<std::string> WorkerEnvironment(const LaunchOptions& o, int local_rank, int generation,
                                           int port) {
  const int rank = o.node_rank * o.nproc + local_rank;
  return CurrentEnvironment({
      "RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(o.nnodes * o.nproc),
      "LOCAL_RANK=" + std::to_string(local_rank),
      "LOCAL_WORLD_SIZE=" + std::to_string(o.nproc),
      "GROUP_RANK=" + std::to_string(o.node_rank),
      "MASTER_ADDR=" + o.master_addr,
      "MASTER_PORT=" + std::to_string(port),
      "REEL_AGENT_STORE=1",
      "REEL_RESTART_GENERATION=" + std::to_string(generation),
      "TORCHELASTIC_RESTART_COUNT=" + std::to_string(generation),
  });
}

std::string Describe(const Worker& w) {
  std::string who = "rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.pid) + ")";
  if (WIFSIGNALED(w.status))
    return who + " was killed by signal " + std::to_string(WTERMSIG(w.status));
  if (WIFEXITED(w.status)) {
    if (WEXITSTATUS(w.status) == 127) return who + " could not be started (exit 127)";
    return who + " exited with code " + std::to_string(WEXITSTATUS(w.status));
  }
  return who + " ended";
}

// Stops every running worker: SIGTERM, then SIGKILL after the grace period.
void StopAll(std::vector<Worker>& workers, double grace_s) {
  for (auto& w : workers) {
    if (w.running) {
      kill(w.pid, SIGTERM);
      kill(w.pid, SIGCONT);  // a stopped worker must run to handle SIGTERM
    }
  }
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  bool killed = false;
  while (true) {
    bool any = false;
    for (auto& w : workers) {
      if (!w.running) continue;
      if (waitpid(w.pid, &w.status, WNOHANG) == w.pid) {
        w.running = false;
      } else {
        any = true;
      }
    }
    if (!any) return;
    if (!killed && Clock::now() > deadline) {
      for (auto& w : workers) {
        if (w.running) kill(w.pid, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& o) : o_(o) {}

  Result<LaunchResult> Run() {
    REEL_RETURN_IF_ERROR(OpenStore());
    if (o_.restart_alone) return RunRestartingAlone();
    LaunchResult result;
    int generation = 0;
    while (true) {
      REEL_RETURN_IF_ERROR(JoinGeneration(generation));
      std::vector<Worker> workers;
      REEL_RETURN_IF_ERROR(StartAll(generation, &workers));
      Outcome outcome = Watch(workers, generation);
      if (outcome.kind == Outcome::kSucceeded) {
        REEL_RETURN_IF_ERROR(FinishJob());
        result.exit_code = 0;
        result.restarts = generation;
        return result;
      }
      if (outcome.kind == Outcome::kInterrupted) return Interrupted(workers, generation);
      if (outcome.kind == Outcome::kPreempted) {
        StopAll(workers, o_.stop_grace_s);  // the others are stopping at the same step
        result.exit_code = kExitPreempted;
        result.failure = "preempted: " + outcome.failure;
        result.restarts = generation;
        return result;
      }
      if (outcome.kind == Outcome::kLocalFailure && o_.nnodes > 1) {
        try {
          store_->add("restarts", 1);
        } catch (const std::exception&) {
        }
      }
      StopAll(workers, o_.stop_grace_s);
      result.failure = outcome.failure;
      result.exit_code = outcome.exit_code;
      result.restarts = generation;
      if (generation >= o_.max_restarts) {
        Logger("launch")->error("{}; no restarts left ({} allowed)", outcome.failure,
                                o_.max_restarts);
        return result;
      }
      generation = NextGeneration(generation);
      Logger("launch")->warn(
          "{}; restarting all {} workers of this node from the latest checkpoint (restart {} of "
          "{})",
          outcome.failure, o_.nproc, generation, o_.max_restarts);
    }
  }

 private:
  Status StartAll(int generation, std::vector<Worker>* workers) {
    for (int local = 0; local < o_.nproc; ++local) {
      auto started = Start(local, generation, generation > 0);
      if (!started.ok()) {
        StopAll(*workers, o_.stop_grace_s);
        return started.status();
      }
      workers->push_back(*started);
    }
    return Status::Ok();
  }

  Result<Worker> Start(int local, int generation, bool restarted) {
    std::vector<std::string> argv = o_.worker_argv;
    if (restarted) argv.insert(argv.end(), o_.restart_args.begin(), o_.restart_args.end());
    REEL_ASSIGN_OR_RETURN(pid_t pid,
                          SpawnProcess(argv, WorkerEnvironment(o_, local, generation, port_)));
    const int rank = o_.node_rank * o_.nproc + local;
    Logger("launch")->info("generation {}: rank {} started as pid {}", generation, rank, pid);
    return Worker{rank, pid, true, 0};
  }

  // A stop signal: every worker is stopped. SIGTERM is a preemption: when every worker wrote
  // its checkpoint and said so, the job says so too, and a scheduler requeues it.
  LaunchResult Interrupted(std::vector<Worker>& workers, int restarts) {
    StopAll(workers, o_.stop_grace_s);
    LaunchResult result;
    result.exit_code = 128 + g_stop_signal;
    result.failure = "stopped by signal " + std::to_string(g_stop_signal.load());
    const bool all_preempted = std::all_of(workers.begin(), workers.end(), [](const Worker& w) {
      return WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitPreempted;
    });
    if (g_stop_signal == SIGTERM && all_preempted) {
      result.exit_code = kExitPreempted;
      result.failure = "preempted: every worker stopped at a checkpoint";
    }
    result.restarts = restarts;
    return result;
  }

  // restart_alone: a process that fails is started again by itself; the job ends when all have
  // exited 0, when restarts run out, or on a stop signal or a preempted process.
  Result<LaunchResult> RunRestartingAlone() {
    std::vector<Worker> workers;
    REEL_RETURN_IF_ERROR(StartAll(0, &workers));
    LaunchResult result;
    while (true) {
      if (g_stop_signal) return Interrupted(workers, result.restarts);
      int running = 0;
      for (auto& w : workers) {
        if (!w.running) continue;
        if (waitpid(w.pid, &w.status, WNOHANG) != w.pid) {
          ++running;
          continue;
        }
        w.running = false;
        if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0) continue;
        if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitPreempted) {
          StopAll(workers, o_.stop_grace_s);
          return LaunchResult{kExitPreempted, result.restarts, Describe(w) + " (preempted)"};
        }
        result.failure = Describe(w);
        if (result.restarts >= o_.max_restarts) {
          Logger("launch")->error("{}; no restarts left ({} allowed)", result.failure,
                                  o_.max_restarts);
          StopAll(workers, o_.stop_grace_s);
          result.exit_code = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 1;
          return result;
        }
        ++result.restarts;
        Logger("launch")->warn("{}; starting rank {} again alone (restart {} of {})",
                               result.failure, w.rank, result.restarts, o_.max_restarts);
        auto again = Start(w.rank - o_.node_rank * o_.nproc, 0, true);
        if (!again.ok()) {
          StopAll(workers, o_.stop_grace_s);
          return again.status();
        }
        w = *again;
        ++running;
      }
      if (running == 0) return result;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  struct Outcome {
    enum Kind {
      kSucceeded,
      kLocalFailure,
      kRemoteFailure,
      kInterrupted,
      kPreempted
    } kind = kSucceeded;
    std::string failure;
    int exit_code = 1;
  };

  Status OpenStore() {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(o_.master_port);
    so.isServer = o_.node_rank == 0;
    so.waitWorkers = false;
    so.timeout = std::chrono::milliseconds(static_cast<int64_t>(o_.connect_timeout_s * 1000));
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(o_.master_addr, so);
    } catch (const std::exception& e) {
      return UnavailableError(std::string(so.isServer ? "cannot host" : "cannot reach") +
                              " the rendezvous store at " + o_.master_addr + ":" +
                              std::to_string(o_.master_port) + ": " + e.what());
    }
    port_ = store_->getPort();
    return Status::Ok();
  }

  // Every node's launcher must join a generation before its workers start.
  Status JoinGeneration(int generation) {
    if (o_.nnodes == 1) return Status::Ok();
    const std::string key = "launchers/gen" + std::to_string(generation);
    store_->add(key, 1);
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.connect_timeout_s * 1000));
    while (store_->add(key, 0) < o_.nnodes) {
      if (Clock::now() > deadline) {
        return UnavailableError("only " + std::to_string(store_->add(key, 0)) + " of " +
                                std::to_string(o_.nnodes) + " nodes joined generation " +
                                std::to_string(generation) + " within " +
                                std::to_string(static_cast<int>(o_.connect_timeout_s)) + " s");
      }
      if (g_stop_signal) return CancelledError("stopped by a signal while waiting for other nodes");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::Ok();
  }

  int NextGeneration(int generation) {
    if (o_.nnodes == 1) return generation + 1;
    // Let every node record its failure before reading the count, so all agree on it.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    try {
      return std::max<int>(generation + 1, static_cast<int>(store_->add("restarts", 0)));
    } catch (const std::exception&) {
      return generation + 1;
    }
  }

  Outcome Watch(std::vector<Worker>& workers, int generation) {
    auto last_poll = Clock::now();
    while (true) {
      if (g_stop_signal) return {Outcome::kInterrupted, "", 0};
      int running = 0;
      for (auto& w : workers) {
        if (!w.running) continue;
        if (waitpid(w.pid, &w.status, WNOHANG) == w.pid) {
          w.running = false;
          const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
          if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitPreempted) {
            // A worker told to stop (SIGTERM to it alone): every rank stops at the same step.
            return {Outcome::kPreempted, Describe(w) + " (preempted)", kExitPreempted};
          }
          if (!ok) {
            Outcome failed{Outcome::kLocalFailure, Describe(w), 1};
            if (WIFEXITED(w.status) && WEXITSTATUS(w.status) != 0)
              failed.exit_code = WEXITSTATUS(w.status);
            return failed;
          }
        } else {
          ++running;
        }
      }
      if (running == 0) return {Outcome::kSucceeded, "", 0};
      if (o_.nnodes > 1 && Clock::now() - last_poll > std::chrono::milliseconds(500)) {
        last_poll = Clock::now();
        try {
          if (store_->add("restarts", 0) > generation) {
            return {Outcome::kRemoteFailure, "a worker on another node failed", 1};
          }
        } catch (const std::exception& e) {
          return {Outcome::kRemoteFailure, std::string("the rendezvous store is gone: ") + e.what(),
                  1};
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Node 0 keeps the store up until every node's workers are done.
  Status FinishJob() {
    if (o_.nnodes == 1) return Status::Ok();
    try {
      store_->add("launchers/done", 1);
      if (o_.node_rank != 0) return Status::Ok();
      const auto deadline = Clock::now() + std::chrono::milliseconds(
                                               static_cast<int64_t>(o_.connect_timeout_s * 1000));
      while (store_->add("launchers/done", 0) < o_.nnodes && Clock::now() < deadline &&
             !g_stop_signal) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception& e) {
      Logger("launch")->warn("finishing the job: {}", e.what());
    }
    return Status::Ok();
  }

  const LaunchOptions& o_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  int port_ = 0;
};

}  // namespace

Result<LaunchResult> RunLauncher(const LaunchOptions& options) {
  if (options.nproc < 1 || options.nnodes < 1 || options.node_rank < 0 ||
      options.node_rank >= options.nnodes) {
    return InvalidArgumentError(
        "launcher: need nproc >= 1, nnodes >= 1 and 0 <= node_rank < nnodes (got nproc " +
        std::to_string(options.nproc) + ", nnodes " + std::to_string(options.nnodes) +
        ", node_rank " + std::to_string(options.node_rank) + ")");
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    return InvalidArgumentError(
        "launcher: a job over several nodes needs --master-port (and --master-addr: node 0's "
        "address)");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return InvalidArgumentError("launcher: --master-port must be in [0, 65535]");
  }
  if (options.max_restarts < 0)
    return InvalidArgumentError("launcher: --max-restarts must be >= 0");
  if (options.worker_argv.empty()) return InvalidArgumentError("launcher: no worker command");
  if (options.restart_alone && options.nnodes > 1) {
    return InvalidArgumentError(
        "launcher: restarting processes alone (parameter servers) needs a single node");
  }
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  Launcher launcher(options);
  auto result = launcher.Run();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace reel::parallel
