#include "sched/lease.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "db/testing/test_database.h"
#include "sched/jobs.h"
#include "sched/schema.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::sched {
namespace {

using std::chrono::milliseconds;

class LeaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    test_db_ = db::testing::TestDatabase::Make(GetParam());
    if (!test_db_) GTEST_SKIP() << "no PostgreSQL server (REEL_TEST_POSTGRES)";
    std::unique_ptr<db::Database> db = Connect();
    ASSERT_OK(db::Migrate(*db, "sched", internal::SchedMigrations()));
  }

  std::unique_ptr<db::Database> Connect() {
    Result<std::unique_ptr<db::Database>> db = db::Open(test_db_->Uri());
    REEL_CHECK(db.ok()) << db.status().ToString();
    return std::move(*db);
  }

  // A daemon's lease on its own connection.
  struct Daemon {
    std::unique_ptr<db::Database> db;
    std::unique_ptr<Lease> lease;
  };
  Daemon Make(const std::string& identity) {
    Daemon d{Connect(), nullptr};
    d.lease = std::make_unique<Lease>(
        d.db.get(), LeaseOptions{"scheduler", identity, "http://" + identity, kDuration, &clock_});
    return d;
  }

  static constexpr milliseconds kDuration{5000};
  FakeClock clock_;
  std::unique_ptr<db::testing::TestDatabase> test_db_;
};

TEST_P(LeaseTest, TheFirstLeadsAndTheSecondStandsByNamingIt) {
  Daemon a = Make("a"), b = Make("b");
  ASSERT_OK(a.lease->Step());
  EXPECT_TRUE(a.lease->leading());
  EXPECT_EQ(a.lease->fence().epoch, 1);
  ASSERT_OK(b.lease->Step());
  EXPECT_FALSE(b.lease->leading());
  EXPECT_EQ(b.lease->leader_url(), "http://a");
}

TEST_P(LeaseTest, AStandbyNeverTakesALeaseThatIsRenewed) {
  Daemon a = Make("a"), b = Make("b");
  ASSERT_OK(a.lease->Step());
  for (int i = 0; i < 30; ++i) {
    clock_.Advance(milliseconds(1000));
    ASSERT_OK(a.lease->Step());
    ASSERT_OK(b.lease->Step());
    ASSERT_TRUE(a.lease->leading());
    ASSERT_FALSE(b.lease->leading()) << "after " << i + 1 << " s";
  }
}

TEST_P(LeaseTest, AStandbyTakesOverAfterAWholeDurationOfSilence) {
  Daemon a = Make("a"), b = Make("b");
  ASSERT_OK(a.lease->Step());
  ASSERT_OK(b.lease->Step());  // sees the row now
  const Fence old = a.lease->fence();
  clock_.Advance(kDuration - milliseconds(1));
  ASSERT_OK(b.lease->Step());
  EXPECT_FALSE(b.lease->leading()) << "taken before the duration had passed";
  clock_.Advance(milliseconds(1));
  ASSERT_OK(b.lease->Step());
  ASSERT_TRUE(b.lease->leading());
  EXPECT_EQ(b.lease->fence().epoch, 2);

  // The old leader finds out at its next round, and its writes fail from now on.
  ASSERT_OK(a.lease->Step());
  EXPECT_FALSE(a.lease->leading());
  EXPECT_EQ(a.lease->leader_url(), "http://b");
  std::unique_ptr<db::Database> db = Connect();
  EXPECT_EQ(CheckFence(*db, old).code(), StatusCode::kFailedPrecondition);
  EXPECT_OK(CheckFence(*db, b.lease->fence()));
}

TEST_P(LeaseTest, AReleasedLeaseIsTakenAtOnce) {
  Daemon a = Make("a"), b = Make("b");
  ASSERT_OK(a.lease->Step());
  ASSERT_OK(b.lease->Step());
  ASSERT_OK(a.lease->Release());
  EXPECT_FALSE(a.lease->leading());
  ASSERT_OK(b.lease->Step());
  EXPECT_TRUE(b.lease->leading());
}

// A daemon restarted on the same machine after kill -9 need not wait out its own old lease.
TEST_P(LeaseTest, AGoneHolderOfTheSameIdentityIsTakenOverAtOnce) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  std::unique_ptr<db::Database> db = Connect();
  ASSERT_OK(db->Exec("INSERT INTO sched_lease (name, holder, url, epoch, renewals, renewed_ms) "
                     "VALUES ('scheduler', ?, 'http://old', 7, 3, 0)",
                     {"m:" + std::to_string(child)})
                .status());
  Daemon other = Make("n");
  ASSERT_OK(other.lease->Step());
  EXPECT_FALSE(other.lease->leading()) << "another machine cannot know that process is gone";
  Daemon same = Make("m");
  ASSERT_OK(same.lease->Step());
  ASSERT_TRUE(same.lease->leading());
  EXPECT_EQ(same.lease->fence().epoch, 8);
}

TEST_P(LeaseTest, AFencedJobStoreRefusesWritesOnceTheLeaseMoved) {
  Daemon a = Make("a"), b = Make("b");
  ASSERT_OK(a.lease->Step());
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> store,
                       JobStore::Open(dir.path(), test_db_->Uri()));
  store->SetFence(a.lease->fence());
  ASSERT_OK_AND_ASSIGN(JobRecord job, JobFromJson({{"command", {"true"}}}));
  ASSERT_OK(store->Add(&job).status());
  job.state = "running";
  ASSERT_OK(store->Update(job));

  ASSERT_OK(b.lease->Step());
  clock_.Advance(kDuration);
  ASSERT_OK(b.lease->Step());
  ASSERT_TRUE(b.lease->leading());
  job.state = "failed";
  EXPECT_EQ(store->Update(job).code(), StatusCode::kFailedPrecondition);
  JobRecord second = job;
  EXPECT_EQ(store->Add(&second).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(JobRecord stored, store->Get(job.spec.id));
  EXPECT_EQ(stored.state, "running") << "the refused write changed nothing";
  ASSERT_OK_AND_ASSIGN(std::vector<JobRecord> all, store->List());
  EXPECT_EQ(all.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, LeaseTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, LeaseTest, ::testing::Values("postgres"));

}  // namespace
}  // namespace reel::sched
