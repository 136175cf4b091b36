#include "sched/runner.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <deque>
#include <filesystem>

#include "base/subprocess.h"
#include "http/server.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait.h"

namespace reel::sched {
namespace {

using std::chrono::milliseconds;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Runs "processes" on a fake clock: each attempt of a task takes the time and ends with the code
// its script gives (1s and exit 0 when none); Terminate ends one at once by SIGTERM.
class FakeExecutor : public Executor {
 public:
  struct Attempt {
    milliseconds takes{1000};
    int exit_code = 0;
  };
  explicit FakeExecutor(FakeClock* clock) : clock_(clock) {}

  std::map<std::string, std::deque<Attempt>> script;
  std::vector<std::pair<std::string, milliseconds>> starts;  // task, when (since the start)
  std::vector<std::string> terminated;
  size_t max_running = 0;

  Result<int64_t> Start(const Launch& launch) override {
    Attempt a;
    auto& queue = script[launch.task];
    if (!queue.empty()) {
      a = queue.front();
      queue.pop_front();
    }
    starts.emplace_back(launch.task, Since());
    const int64_t id = next_id_++;
    running_[id] = {launch.task, clock_->Now() + a.takes, Exit{id, a.exit_code, 0}};
    max_running = std::max(max_running, running_.size());
    return id;
  }
  void Terminate(int64_t id, milliseconds) override {
    auto& r = running_.at(id);
    terminated.push_back(r.task);
    r.ends = clock_->Now();
    r.exit = Exit{id, -1, 15};
  }
  std::optional<Exit> Wait(Clock::TimePoint deadline) override {
    auto next = running_.end();
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (next == running_.end() || it->second.ends < next->second.ends) next = it;
    }
    if (next != running_.end() && next->second.ends <= deadline) {
      if (next->second.ends > clock_->Now()) clock_->Advance(next->second.ends - clock_->Now());
      const Exit exit = next->second.exit;
      running_.erase(next);
      return exit;
    }
    if (deadline > clock_->Now() && deadline != Clock::TimePoint::max()) {
      clock_->Advance(deadline - clock_->Now());
    }
    return std::nullopt;
  }
  size_t running() const override { return running_.size(); }

  milliseconds Since() const {
    return std::chrono::duration_cast<milliseconds>(clock_->Now() - start_);
  }

 private:
  struct Running {
    std::string task;
    Clock::TimePoint ends;
    Exit exit;
  };
  FakeClock* clock_;
  Clock::TimePoint start_ = clock_->Now();
  std::map<int64_t, Running> running_;
  int64_t next_id_ = 1;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<RunStore>> store = RunStore::Open(dir_.Join("state"));
    ASSERT_OK(store);
    store_ = std::move(*store);
    options_.capacity.cpu_millis = 2000;
    options_.capacity.memory_bytes = int64_t{8} << 30;
    options_.clock = &clock_;
    options_.workdir = dir_.path();
  }

  Result<RunRecord> RunFake(const std::string& yaml) {
    REEL_ASSIGN_OR_RETURN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
    return RunPipeline(p, *store_, fake_, options_);
  }

  std::map<std::string, TaskRecord> Tasks(const std::string& run) {
    std::map<std::string, TaskRecord> by_name;
    Result<std::vector<TaskRecord>> tasks = store_->GetTasks(run);
    EXPECT_OK(tasks);
    if (!tasks.ok()) return by_name;
    for (TaskRecord& t : *tasks) by_name[t.name] = t;
    return by_name;
  }

  TempDir dir_;
  FakeClock clock_;
  FakeExecutor fake_{&clock_};
  std::unique_ptr<RunStore> store_;
  RunnerOptions options_;
};

TEST_F(RunnerTest, TasksRunInDependencyOrderWithinTheCapacity) {
  // Two 2-CPU tasks on 2 CPUs never overlap; 1-CPU tasks run two at a time.
  const std::string yaml =
      "name: p\ntasks:\n"
      "  - {name: big1, command: [/bin/true], resources: {cpu: 2}}\n"
      "  - {name: big2, command: [/bin/true], resources: {cpu: 2}}\n"
      "  - {name: s1, command: [/bin/true], depends_on: [big1, big2]}\n"
      "  - {name: s2, command: [/bin/true], depends_on: [big2]}\n"
      "  - {name: s3, command: [/bin/true], depends_on: [s1]}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake(yaml));
  EXPECT_EQ(run.state, RunState::kSucceeded);
  EXPECT_EQ(run.id, "p-1");
  using Start = std::pair<std::string, milliseconds>;
  EXPECT_EQ(fake_.starts, (std::vector<Start>{{"big1", milliseconds(0)},
                                              {"big2", milliseconds(1000)},
                                              {"s1", milliseconds(2000)},
                                              {"s2", milliseconds(2000)},
                                              {"s3", milliseconds(3000)}}));
  EXPECT_EQ(fake_.max_running, 2u);
  for (const auto& [name, t] : Tasks(run.id)) {
    EXPECT_EQ(t.state, TaskState::kSucceeded) << name;
    EXPECT_EQ(t.attempts, 1) << name;
  }
  ASSERT_OK_AND_ASSIGN(RunRecord again, RunFake(yaml));
  EXPECT_EQ(again.id, "p-2");
}

TEST_F(RunnerTest, AFailedAttemptIsRetriedAfterAGrowingPause) {
  fake_.script["a"] = {{milliseconds(1000), 1}, {milliseconds(1000), 2}, {milliseconds(1000), 0}};
  std::vector<std::string> seen;
  options_.on_task = [&](const RunRecord&, const TaskRecord& t) {
    seen.push_back(t.name + " " + std::string(TaskStateName(t.state)) + " " + t.reason);
  };
  ASSERT_OK_AND_ASSIGN(RunRecord run,
                       RunFake("name: p\ntasks:\n  - {name: a, command: [/bin/true], "
                               "retries: 2, backoff: 1s}\n"));
  EXPECT_EQ(run.state, RunState::kSucceeded);
  using Start = std::pair<std::string, milliseconds>;
  // Ends at 1s, waits 1s; ends at 3s, waits 2s.
  EXPECT_EQ(fake_.starts,
            (std::vector<Start>{
                {"a", milliseconds(0)}, {"a", milliseconds(2000)}, {"a", milliseconds(5000)}}));
  EXPECT_EQ(Tasks(run.id)["a"].attempts, 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"a running ", "a retrying exit 1; attempt 2 of 3 in 1s",
                                            "a running ", "a retrying exit 2; attempt 3 of 3 in 2s",
                                            "a running ", "a succeeded "}));
}

TEST_F(RunnerTest, AFailureStopsNewWorkAndSkipsWhatDependsOnIt) {
  fake_.script["bad"] = {{milliseconds(1000), 3}, {milliseconds(1000), 3}};
  fake_.script["long"] = {{milliseconds(5000), 0}};
  const std::string yaml =
      "name: p\ntasks:\n"
      "  - {name: bad, command: [/bin/true], retries: 1}\n"
      "  - {name: long, command: [/bin/true]}\n"
      "  - {name: after_bad, command: [/bin/true], depends_on: [bad]}\n"
      "  - {name: after_long, command: [/bin/true], depends_on: [long]}\n"
      "  - {name: after_that, command: [/bin/true], depends_on: [after_bad]}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake(yaml));
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_EQ(run.failed_task, "bad");
  auto tasks = Tasks(run.id);
  EXPECT_EQ(tasks["bad"].state, TaskState::kFailed);
  EXPECT_EQ(tasks["bad"].reason, "exit 3");
  EXPECT_EQ(tasks["bad"].exit_code, 3);
  EXPECT_EQ(tasks["bad"].attempts, 2);
  EXPECT_EQ(tasks["long"].state, TaskState::kSucceeded);  // running already: it finishes
  EXPECT_EQ(tasks["after_bad"].state, TaskState::kSkipped);
  EXPECT_EQ(tasks["after_bad"].reason, "upstream task bad failed");
  EXPECT_EQ(tasks["after_that"].reason, "upstream task after_bad skipped");
  EXPECT_EQ(tasks["after_long"].state, TaskState::kSkipped);
  EXPECT_EQ(tasks["after_long"].reason, "not started: task bad failed");
  ASSERT_OK_AND_ASSIGN(RunRecord stored, store_->GetRun(run.id));
  EXPECT_EQ(stored.state, RunState::kFailed);
}

TEST_F(RunnerTest, ATaskPastItsTimeoutIsStoppedAndCountsAsFailed) {
  fake_.script["slow"] = {{milliseconds(60000), 0}, {milliseconds(60000), 0}};
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake("name: p\ntasks:\n  - {name: slow, command: "
                                              "[/bin/true], timeout: 5s, retries: 1}\n"));
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_EQ(fake_.terminated, (std::vector<std::string>{"slow", "slow"}));
  using Start = std::pair<std::string, milliseconds>;
  EXPECT_EQ(fake_.starts,
            (std::vector<Start>{{"slow", milliseconds(0)}, {"slow", milliseconds(6000)}}));
  EXPECT_EQ(Tasks(run.id)["slow"].reason, "timed out after 5s");
}

TEST_F(RunnerTest, ATaskLargerThanTheMachineIsRefusedBeforeAnythingRuns) {
  Result<RunRecord> run = RunFake(
      "name: p\ntasks:\n  - {name: ok, command: [/bin/true]}\n"
      "  - {name: huge, command: [/bin/true], resources: {cpu: 4, memory: 1Gi}}\n");
  ASSERT_STATUS(run, StatusCode::kInvalidArgument);
  EXPECT_NE(
      run.status().message().find(
          "task 'huge' asks for cpu 4, memory 1Gi but at most cpu 2, memory 8Gi is available"),
      std::string::npos)
      << run.status().ToString();
  EXPECT_TRUE(fake_.starts.empty());
  EXPECT_TRUE(store_->ListRuns(10).value().empty());  // nothing recorded either
}

TEST_F(RunnerTest, AnUnknownProgramFailsItsTaskWithoutRetries) {
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake("name: p\ntasks:\n  - {name: a, command: "
                                              "[no-such-program-xyz], retries: 3}\n"));
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_EQ(Tasks(run.id)["a"].reason, "program 'no-such-program-xyz' is not on PATH");
  EXPECT_TRUE(fake_.starts.empty());
}

TEST_F(RunnerTest, ASecondRunReusesCachedStepsUnlessDisabled) {
  const std::string yaml =
      "name: p\ntasks:\n  - {name: a, command: [/bin/true, x]}\n"
      "  - {name: b, command: [/bin/true], depends_on: [a]}\n"
      "  - {name: c, command: [/bin/true], cache: false}\n"
      "  - {name: d, command: [/bin/true], depends_on: [c]}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord first, RunFake(yaml));
  ASSERT_EQ(fake_.starts.size(), 4u);
  ASSERT_OK_AND_ASSIGN(RunRecord second, RunFake(yaml));
  auto tasks = Tasks(second.id);
  EXPECT_EQ(tasks["a"].state, TaskState::kCached);
  EXPECT_EQ(tasks["a"].cached_from, first.id);
  EXPECT_EQ(tasks["b"].state, TaskState::kCached);
  // c is never cached, and so neither is what reads it.
  EXPECT_EQ(tasks["c"].state, TaskState::kSucceeded);
  EXPECT_EQ(tasks["d"].state, TaskState::kSucceeded);
  EXPECT_EQ(fake_.starts.size(), 6u);
  options_.use_cache = false;
  ASSERT_OK_AND_ASSIGN(RunRecord third, RunFake(yaml));
  EXPECT_EQ(Tasks(third.id)["a"].state, TaskState::kSucceeded);
  // A different argument is a different step.
  options_.use_cache = true;
  const size_t before = fake_.starts.size();
  std::string changed = yaml;
  changed.replace(changed.find("true, x"), 7, "true, y");
  ASSERT_OK_AND_ASSIGN(RunRecord fourth, RunFake(changed));
  EXPECT_EQ(Tasks(fourth.id)["a"].state, TaskState::kSucceeded);
  EXPECT_EQ(Tasks(fourth.id)["b"].state, TaskState::kSucceeded);  // its input changed too
  EXPECT_EQ(fake_.starts.size(), before + 4);
}

TEST_F(RunnerTest, RetryRerunsOnlyWhatFailedAndWhatDependsOnIt) {
  fake_.script["b"] = {{milliseconds(1000), 1}};
  const std::string yaml =
      "name: p\ntasks:\n  - {name: a, command: [/bin/true], cache: false}\n"
      "  - {name: b, command: [/bin/true], depends_on: [a], cache: false}\n"
      "  - {name: c, command: [/bin/true], depends_on: [b], cache: false}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake(yaml));
  ASSERT_EQ(run.state, RunState::kFailed);
  EXPECT_STATUS(RetryRun("p-9", *store_, fake_, options_), StatusCode::kNotFound);
  fake_.starts.clear();
  ASSERT_OK_AND_ASSIGN(RunRecord retried, RetryRun(run.id, *store_, fake_, options_));
  EXPECT_EQ(retried.id, run.id);
  EXPECT_EQ(retried.state, RunState::kSucceeded);
  EXPECT_TRUE(retried.failed_task.empty());
  ASSERT_EQ(fake_.starts.size(), 2u);
  EXPECT_EQ(fake_.starts[0].first, "b");
  EXPECT_EQ(fake_.starts[1].first, "c");
  EXPECT_EQ(Tasks(run.id)["a"].attempts, 1);
  EXPECT_STATUS(RetryRun(run.id, *store_, fake_, options_), StatusCode::kFailedPrecondition);
}

TEST_F(RunnerTest, GpusAreHandedOutByIndex) {
  options_.capacity.gpu = 2;
  options_.gpu_ids = {"4", "7"};
  const std::string yaml =
      "name: p\ntasks:\n  - {name: a, command: [/bin/true], resources: {gpu: 1}}\n"
      "  - {name: b, command: [/bin/true], resources: {gpu: 2}}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunFake(yaml));
  EXPECT_EQ(run.state, RunState::kSucceeded);
  using Start = std::pair<std::string, milliseconds>;
  EXPECT_EQ(fake_.starts, (std::vector<Start>{{"a", milliseconds(0)}, {"b", milliseconds(1000)}}));
}

// Real processes from here on.
TEST_F(RunnerTest, ANewReelOrReelTorchBesideItRunsReelStepsAgain) {
  std::filesystem::create_directories(dir_.Join("bin"));
  WriteFile(dir_.Join("bin/reel"), "front 1");
  WriteFile(dir_.Join("bin/reel-torch"), "torch 1");
  options_.reel_binary = dir_.Join("bin/reel");
  const std::string yaml = "name: p\ntasks:\n  - {name: t, command: [reel, train]}\n";
  ASSERT_OK(RunFake(yaml));
  ASSERT_OK_AND_ASSIGN(RunRecord again, RunFake(yaml));
  EXPECT_EQ(Tasks(again.id)["t"].state, TaskState::kCached);
  WriteFile(dir_.Join("bin/reel-torch"), "torch 2");  // `reel train` runs there
  ASSERT_OK_AND_ASSIGN(RunRecord torch, RunFake(yaml));
  EXPECT_EQ(Tasks(torch.id)["t"].state, TaskState::kSucceeded);
  WriteFile(dir_.Join("bin/reel"), "front 2");
  ASSERT_OK_AND_ASSIGN(RunRecord front, RunFake(yaml));
  EXPECT_EQ(Tasks(front.id)["t"].state, TaskState::kSucceeded);
  EXPECT_EQ(fake_.starts.size(), 3u);
}

class LocalRunnerTest : public RunnerTest {
 protected:
  Result<RunRecord> RunLocal(const std::string& yaml,
                             const std::map<std::string, std::string>& inputs = {}) {
    REEL_ASSIGN_OR_RETURN(Pipeline p, ParsePipeline(yaml, "p.yaml", inputs));
    RunnerOptions options = options_;
    options.clock = Clock::System();
    options.kill_grace = milliseconds(200);
    return RunPipeline(p, *store_, *executor_, options);
  }
  std::unique_ptr<Executor> executor_ = MakeLocalExecutor();
};

constexpr char kCopy[] =
    "name: copy\ninputs: {config: conf.txt}\ntasks:\n"
    "  - name: make\n"
    "    command: [sh, -c, 'cat \"$1\" > \"$2\"; echo \"$REEL_RUN_ID $REEL_TASK\"', sh,"
    " \"{{inputs.config}}\", \"{{outputs.msg}}\"]\n"
    "  - name: copy\n"
    "    command: [sh, -c, 'tr a-z A-Z < \"$1\" > \"$2\"', sh, \"{{tasks.make.outputs.msg}}\","
    " \"{{outputs.upper}}\"]\n";

TEST_F(LocalRunnerTest, OutputsPassFromTaskToTaskAndCachedStepsAreReused) {
  WriteFile(dir_.Join("conf.txt"), "hello\n");
  ASSERT_OK_AND_ASSIGN(RunRecord first, RunLocal(kCopy));
  ASSERT_EQ(first.state, RunState::kSucceeded) << first.failed_task;
  auto tasks = Tasks(first.id);
  const std::string upper = tasks["copy"].outputs.at("upper");
  EXPECT_EQ(upper, dir_.Join("state") + "/artifacts/copy-1/copy/upper");
  EXPECT_EQ(ReadFile(upper), "HELLO\n");
  EXPECT_NE(ReadFile(tasks["make"].log).find("copy-1 make\n"), std::string::npos);

  ASSERT_OK_AND_ASSIGN(RunRecord second, RunLocal(kCopy));
  tasks = Tasks(second.id);
  EXPECT_EQ(tasks["make"].state, TaskState::kCached);
  EXPECT_EQ(tasks["copy"].state, TaskState::kCached);
  EXPECT_EQ(tasks["copy"].outputs.at("upper"), upper);

  // The config file's contents are part of the key: both steps run again.
  WriteFile(dir_.Join("conf.txt"), "changed\n");
  ASSERT_OK_AND_ASSIGN(RunRecord third, RunLocal(kCopy));
  tasks = Tasks(third.id);
  EXPECT_EQ(tasks["make"].state, TaskState::kSucceeded);
  EXPECT_EQ(ReadFile(tasks["copy"].outputs.at("upper")), "CHANGED\n");

  // An output removed since is not reused.
  std::filesystem::remove(tasks["copy"].outputs.at("upper"));
  ASSERT_OK_AND_ASSIGN(RunRecord fourth, RunLocal(kCopy));
  EXPECT_EQ(Tasks(fourth.id)["make"].state, TaskState::kCached);
  EXPECT_EQ(Tasks(fourth.id)["copy"].state, TaskState::kSucceeded);
}

TEST_F(LocalRunnerTest, ATimedOutTaskAndWhatItStartedAreKilled) {
  const std::string yaml =
      "name: p\ntasks:\n  - name: hang\n"
      "    command: [sh, -c, 'trap \"\" TERM; sleep 30 & echo $! > child.pid; wait']\n"
      "    timeout: 300ms\n";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunLocal(yaml));
  // Both ignore SIGTERM: only SIGKILL, after the 200 ms grace, ends them.
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(run.state, RunState::kFailed);
  auto tasks = Tasks(run.id);
  EXPECT_EQ(tasks["hang"].reason, "timed out after 300ms");
  const pid_t child = std::stoi(ReadFile(dir_.Join("child.pid")));
  EXPECT_TRUE(testing::WaitUntil([&] { return !ProcessRunning(child); }, std::chrono::seconds(10)));
}

TEST_F(LocalRunnerTest, ProcessesATaskLeavesBehindAreStopped) {
  const std::string yaml =
      "name: p\ntasks:\n  - {name: a, command: [sh, -c, 'sleep 30 & echo $! > bg.pid']}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunLocal(yaml));
  EXPECT_EQ(run.state, RunState::kSucceeded);
  const pid_t bg = std::stoi(ReadFile(dir_.Join("bg.pid")));
  EXPECT_TRUE(testing::WaitUntil([&] { return !ProcessRunning(bg); }, std::chrono::seconds(10)));
}

TEST_F(LocalRunnerTest, HooksHearHowTheRunEnded) {
  const std::string yaml =
      "name: p\non_failure: [sh, -c, 'echo \"$REEL_RUN_ID $REEL_RUN_STATE $REEL_FAILED_TASK\" "
      "> failure.txt']\non_success: [sh, -c, 'echo ok > success.txt']\n"
      "ttl_after_finished: 0s\ntasks:\n"
      "  - {name: first, command: [sh, -c, 'test -f go || exit 4; test -d \"$REEL_SCRATCH\"']}\n";
  std::vector<std::string> messages;
  options_.on_message = [&](const std::string& m) { messages.push_back(m); };
  ASSERT_OK_AND_ASSIGN(RunRecord failed, RunLocal(yaml));
  EXPECT_EQ(failed.state, RunState::kFailed);
  EXPECT_EQ(ReadFile(dir_.Join("failure.txt")), "p-1 failed first\n");
  EXPECT_EQ(Tasks(failed.id)["first"].reason, "exit 4");
  WriteFile(dir_.Join("go"), "");
  ASSERT_OK_AND_ASSIGN(RunRecord ok, RunLocal(yaml));
  EXPECT_EQ(ok.state, RunState::kSucceeded);
  EXPECT_EQ(ReadFile(dir_.Join("success.txt")), "ok\n");
  EXPECT_EQ(messages, (std::vector<std::string>{"on_failure hook done", "on_success hook done"}));
  // A TTL of 0: the scratch space is gone as soon as the run ends; the logs stay.
  EXPECT_FALSE(std::filesystem::exists(store_->ScratchDir(ok.id, "first")));
  EXPECT_TRUE(std::filesystem::exists(store_->LogPath(ok.id, "first")));
}

TEST_F(LocalRunnerTest, AWebhookGetsTheRunAsJson) {
  std::mutex mu;
  std::string received;
  http::Router router;
  ASSERT_OK(router.Add("POST", "/hooks/done", [&](const http::Request& r) {
    std::lock_guard<std::mutex> lock(mu);
    received = r.body;
    return http::Response::Text(200, "thanks");
  }));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<http::Server> server,
                       http::Server::Start(http::ServerOptions{}, std::move(router)));
  const std::string yaml = "name: p\non_success: " + server->url() +
                           "/hooks/done\ntasks:\n  - {name: a, command: [/bin/true]}\n";
  std::vector<std::string> messages;
  options_.on_message = [&](const std::string& m) { messages.push_back(m); };
  ASSERT_OK_AND_ASSIGN(RunRecord run, RunLocal(yaml));
  EXPECT_EQ(run.state, RunState::kSucceeded);
  server->Shutdown();
  EXPECT_EQ(received, R"({"failed_task":"","pipeline":"p","run":"p-1","state":"succeeded"})");
  EXPECT_EQ(messages, std::vector<std::string>{"on_success hook done"});
}

TEST_F(LocalRunnerTest, AnInterruptedRunIsRetried) {
  const std::string yaml = "name: p\ntasks:\n  - {name: a, command: [/bin/true]}\n";
  ASSERT_OK_AND_ASSIGN(Pipeline p, ParsePipeline(yaml, "p.yaml"));
  // What a runner killed mid-run leaves: a run "running" under a process that is gone.
  RunRecord run;
  run.pipeline = "p";
  run.source_name = "p.yaml";
  run.source = yaml;
  run.workdir = dir_.path();
  run.runner_pid = 0x7ffffff0;  // no such process
  ASSERT_OK_AND_ASSIGN(std::string id, store_->CreateRun(run, {"a"}));
  ASSERT_OK_AND_ASSIGN(RunRecord stored, store_->GetRun(id));
  EXPECT_EQ(stored.state, RunState::kInterrupted);
  RunnerOptions options = options_;
  options.clock = Clock::System();
  ASSERT_OK_AND_ASSIGN(RunRecord retried, RetryRun(id, *store_, *executor_, options));
  EXPECT_EQ(retried.state, RunState::kSucceeded);
}

}  // namespace
}  // namespace reel::sched
