// Real cgroups where this machine lets Reel create them (skipped where it does not).
#include "sched/cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/subprocess.h"
#include "testing/status_matchers.h"

namespace reel::sched {
namespace {

std::string UniqueName(const char* what) {
  return std::string("test-") + what + "-" + std::to_string(getpid());
}

// A child that enters `group`, touches `mib` MiB and exits 0 (3 if it could not enter).
pid_t ChildUsing(JobCgroup& group, int mib) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (!group.Enter().ok()) _exit(3);
  const size_t bytes = static_cast<size_t>(mib) << 20;
  char* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) _exit(4);
  std::memset(p, 1, bytes);
  _exit(p[bytes / 2] == 1 ? 0 : 5);
}

int WaitFor(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(JobCgroupTest, TheKernelKillsAGroupOverItsMemory) {
  ASSERT_OK_AND_ASSIGN(auto group, JobCgroup::Create(UniqueName("over"), {64 << 20, ""}));
  if (!group) GTEST_SKIP() << "this machine lets Reel create no cgroup";
  const int status = WaitFor(ChildUsing(*group, 512));
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(group->OomKilled()) << group->kind();
  EXPECT_GT(group->PeakBytes(), 32 << 20);
  EXPECT_LE(group->PeakBytes(), 64 << 20);
}

TEST(JobCgroupTest, AGroupWithinItsMemoryRunsToItsEnd) {
  ASSERT_OK_AND_ASSIGN(auto group, JobCgroup::Create(UniqueName("within"), {256 << 20, ""}));
  if (!group) GTEST_SKIP() << "this machine lets Reel create no cgroup";
  const int status = WaitFor(ChildUsing(*group, 16));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(group->OomKilled());
}

TEST(JobCgroupTest, ASpawnedChildStartsInsideTheGroup) {
  const std::string name = UniqueName("spawn");
  ASSERT_OK_AND_ASSIGN(auto group, JobCgroup::Create(name, {256 << 20, ""}));
  if (!group) GTEST_SKIP() << "this machine lets Reel create no cgroup";
  SpawnOptions options;
  options.cgroup_procs = group->ProcsFiles();
  ASSERT_OK_AND_ASSIGN(pid_t pid,
                       SpawnProcess({"/bin/grep", "-q", "/reel/" + name + "$", "/proc/self/cgroup"},
                                    CurrentEnvironment(), options));
  const int status = WaitFor(pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "not in its group: " << status;
}

TEST(JobCgroupTest, RemovingTheGroupEndsWhatIsLeftInIt) {
  ASSERT_OK_AND_ASSIGN(auto group, JobCgroup::Create(UniqueName("left"), {256 << 20, ""}));
  if (!group) GTEST_SKIP() << "this machine lets Reel create no cgroup";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!group->Enter().ok()) _exit(3);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);  // it is in the group
  group.reset();
  const int status = WaitFor(pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace reel::sched
