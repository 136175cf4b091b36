// A Job's state read from API responses in the shape a Kubernetes 1.30/1.31 API server writes
// them (testdata/k8s/api/jobs: a Kueue-queued job that runs to completion, and a gang that
// fails), and followed through a kubectl that answers them in turn.
#include "sched/kubectl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <vector>

#include "base/files.h"
#include "base/json.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

const std::string kJobs = testing::SourcePath("testdata/k8s/api/jobs/");

K8sJobState StateOf(const std::string& file) {
  Result<std::string> text = ReadFileToString(kJobs + file, "recording");
  REEL_CHECK(text.ok()) << text.status().ToString();
  Result<K8sJobState> state = ReadK8sJobState(ParseJson(*text, file).value());
  REEL_CHECK(state.ok()) << state.status().ToString();
  return *state;
}

TEST(K8sJobStateTest, AJobQueuedByKueueRunsToCompletion) {
  EXPECT_EQ(StateOf("ok/00.json").Describe(), "queued: waiting for admission (Job suspended)");
  EXPECT_EQ(StateOf("ok/01.json").Describe(), "starting: 0/2 workers ready");
  EXPECT_EQ(StateOf("ok/02.json").Describe(), "running: 2/2 workers ready");
  const K8sJobState done = StateOf("ok/03.json");
  EXPECT_TRUE(done.done());
  EXPECT_EQ(done.Describe(), "succeeded: 2/2 workers: CompletionsReached");
}

TEST(K8sJobStateTest, AGangWhoseWorkerFailsFailsWhole) {
  EXPECT_EQ(StateOf("bad/00.json").phase, "running");
  const K8sJobState failing = StateOf("bad/01.json");
  EXPECT_EQ(failing.phase, "failing");
  EXPECT_FALSE(failing.done()) << "its pods are still stopping";
  const K8sJobState failed = StateOf("bad/02.json");
  EXPECT_TRUE(failed.done());
  EXPECT_EQ(failed.Describe(),
            "failed: BackoffLimitExceeded (Job has reached the specified backoff limit)");
  EXPECT_EQ(failed.failed, 2);
}

TEST(K8sJobStateTest, AnAnswerThatIsNotAJobIsDataLoss) {
  EXPECT_STATUS(ReadK8sJobState(nlohmann::json{{"kind", "Pod"}, {"spec", {}}}),
                StatusCode::kDataLoss);
  EXPECT_STATUS(ReadK8sJobState(nlohmann::json::array()), StatusCode::kDataLoss);
}

// A kubectl that prints the recorded states of `scenario` one per call (the last from then on).
std::string FakeKubectl(const testing::TempDir& dir, const std::string& scenario) {
  const std::string path = dir.path() + "/kubectl";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "echo \"$@\" >> '" << dir.path() << "/calls'\n"
                      << "n=$(wc -l < '" << dir.path() << "/calls')\n"
                      << "f=$(ls " << kJobs << scenario << " | sed -n \"${n}p\")\n"
                      << "[ -n \"$f\" ] || f=$(ls " << kJobs << scenario << " | tail -n 1)\n"
                      << "echo 'Warning: a warning on standard error' >&2\n"
                      << "cat " << kJobs << scenario << "/$f\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(FollowK8sJobTest, ReportsEachChangeUntilTheJobEnds) {
  testing::TempDir dir;
  KubectlOptions o;
  o.kubectl = FakeKubectl(dir, "ok");
  o.k8s_namespace = "ml";
  FakeClock clock;
  std::vector<std::string> seen;
  ASSERT_OK_AND_ASSIGN(
      K8sJobState end,
      FollowK8sJob("ok-train", o, std::chrono::seconds(2), std::chrono::minutes(1), &clock,
                   [&](const K8sJobState& s) { seen.push_back(s.phase); }));
  EXPECT_EQ(end.phase, "succeeded");
  EXPECT_EQ(seen, (std::vector<std::string>{"queued", "starting", "running", "succeeded"}));
  Result<std::string> calls = ReadFileToString(dir.path() + "/calls", "calls");
  ASSERT_OK(calls.status());
  EXPECT_EQ(calls->substr(0, calls->find('\n')), "--namespace=ml get job ok-train -o json");
}

TEST(FollowK8sJobTest, GivesUpAtTheTimeoutNamingTheLastState) {
  testing::TempDir dir;
  KubectlOptions o;
  o.kubectl = FakeKubectl(dir, "bad");
  FakeClock clock;
  Result<K8sJobState> end =
      FollowK8sJob("bad-train", o, std::chrono::seconds(2), std::chrono::seconds(2), &clock,
                   [](const K8sJobState&) {});
  EXPECT_STATUS(end, StatusCode::kDeadlineExceeded);
  EXPECT_NE(end.status().message().find("still failing"), std::string::npos)
      << end.status().ToString();
}

TEST(FollowK8sJobTest, AMissingKubectlIsAClearError) {
  KubectlOptions o;
  o.kubectl = "/nonexistent/kubectl";
  EXPECT_STATUS(GetK8sJobState("x", o), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(ApplyK8s("{}", o), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace reel::sched
