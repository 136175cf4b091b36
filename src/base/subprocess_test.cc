#include "base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "testing/status_matchers.h"

namespace reel {
namespace {

TEST(SubprocessTest, ThisProgramIsTheRunningBinaryAndTheMachineHasAName) {
  ASSERT_OK_AND_ASSIGN(std::string self, ThisProgram());
  EXPECT_EQ(self.front(), '/');
  EXPECT_NE(self.find("base_test"), std::string::npos) << self;
  EXPECT_FALSE(MachineName().empty());
}

TEST(SubprocessTest, RunCommandCapturesOutputAndExitCode) {
  ASSERT_OK_AND_ASSIGN(CommandOutput out, RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"},
                                                     CurrentEnvironment()));
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_EQ(out.output, "out\nerr\n");
  ASSERT_OK_AND_ASSIGN(out, RunCommand({"/bin/echo", "a b"}, {}));
  EXPECT_EQ(out.output, "a b\n");
  ASSERT_OK_AND_ASSIGN(out, RunCommand({"no-such-program-xyz"}, CurrentEnvironment()));
  EXPECT_EQ(out.exit_code, 127);
  EXPECT_STATUS(RunCommand({}, {}), StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, RunCommandCanKeepErrorsApartFromOutput) {
  ASSERT_OK_AND_ASSIGN(CommandOutput out,
                       RunCommand({"sh", "-c", "echo '{}'; echo warning >&2; echo '[]'"},
                                  CurrentEnvironment(), /*separate_errors=*/true));
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.output, "{}\n[]\n");
  EXPECT_EQ(out.errors, "warning\n");
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

TEST(SubprocessTest, ADetachedChildLeadsItsOwnSession) {
  SpawnOptions options;
  options.die_with_parent = false;
  // The child reports whether it leads its session (its session id is its pid).
  ASSERT_OK_AND_ASSIGN(
      pid_t pid, SpawnProcess({"/bin/sh", "-c", "[ \"$(cut -d' ' -f6 /proc/$$/stat)\" = $$ ]"},
                              CurrentEnvironment(), options));
  const int status = WaitFor(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SubprocessTest, AChildThatCannotJoinItsCgroupDoesNotRun) {
  SpawnOptions options;
  options.cgroup_procs = {"/nonexistent-cgroup/cgroup.procs"};
  ASSERT_OK_AND_ASSIGN(pid_t pid, SpawnProcess({"/bin/true"}, CurrentEnvironment(), options));
  const int status = WaitFor(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
}

TEST(SubprocessTest, AChildRunsOnTheCoresItIsGiven) {
  SpawnOptions options;
  options.cpus = {0};
  ASSERT_OK_AND_ASSIGN(
      pid_t pid, SpawnProcess({"/bin/sh", "-c",
                               "grep -q 'Cpus_allowed_list:[[:space:]]*0$' /proc/self/status"},
                              CurrentEnvironment(), options));
  int status = WaitFor(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  options.cpus = {4095};  // no such core: the child does not run
  ASSERT_OK_AND_ASSIGN(pid, SpawnProcess({"/bin/true"}, CurrentEnvironment(), options));
  status = WaitFor(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
}

TEST(SubprocessTest, AChildHearsSignalsItsParentBlocks) {
  // A server blocks SIGTERM in its threads to sigwait for it; its children must not inherit that.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  Result<pid_t> pid = SpawnProcess({"/bin/sleep", "30"}, CurrentEnvironment());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_OK(pid);
  const auto start = std::chrono::steady_clock::now();
  kill(*pid, SIGTERM);
  const int status = WaitFor(*pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(SubprocessTest, AProcessGroupIsReachedAsOne) {
  SpawnOptions options;
  options.new_process_group = true;
  ASSERT_OK_AND_ASSIGN(
      pid_t pid, SpawnProcess({"/bin/sh", "-c", "sleep 30 & wait"}, CurrentEnvironment(), options));
  EXPECT_EQ(getpgid(pid), pid);
  ASSERT_EQ(kill(-pid, SIGKILL), 0);
  const int status = WaitFor(pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

}  // namespace
}  // namespace reel
