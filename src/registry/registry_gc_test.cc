// Garbage collection of weight chunks, on SQLite and (registry_postgres_test) PostgreSQL: what
// it removes, what it keeps (delta bases, young chunks), who may run it, and the race with a
// push that reuses a chunk the collector is about to remove, forced with sync points.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "base/sync_point.h"
#include "db/testing/test_database.h"
#include "registry/registry.h"
#include "registry/registry_test_util.h"
#include "testing/status_matchers.h"

namespace reel::registry {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

NewVersion Version(const std::string& model, SafetensorsFile weights) {
  NewVersion v;
  v.model = model;
  v.weights = std::move(weights);
  return v;
}

GcOptions Grace(int64_t ms) {
  GcOptions o;
  o.grace_ms = ms;
  return o;
}

class RegistryGcTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    database_ = db::testing::TestDatabase::Make(GetParam());
    if (!database_) GTEST_SKIP() << "REEL_TEST_POSTGRES is not set (registry_postgres_test)";
    registry_ = Open();
  }
  void TearDown() override { SyncPoint::Get().Reset(); }

  // The registry's clock runs two hours ahead of the store's (which stamps chunks with the
  // system clock), so every chunk written in the test is two hours old to the collector.
  std::unique_ptr<Registry> Open() {
    auto db = db::Open(database_->Uri());
    REEL_CHECK(db.ok()) << db.status().ToString();
    RegistryOptions options;
    options.weights.chunk_bytes = 10000;
    options.now_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count() +
             2 * kHourMs;
    };
    auto r = Registry::Open(std::move(db).value(), chunks_, "", options);
    REEL_CHECK(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }

  size_t StoredChunks() {
    auto all = storage::ListAll(*chunks_, "chunks/");
    REEL_CHECK(all.ok());
    return all->size();
  }

  std::shared_ptr<storage::MemoryStore> chunks_ = std::make_shared<storage::MemoryStore>();
  std::unique_ptr<db::testing::TestDatabase> database_;
  std::unique_ptr<Registry> registry_;
};

TEST_P(RegistryGcTest, RemovesWhatNoVersionNeedsAndKeepsTheBasesOfDeltas) {
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, registry_->Register(Version("clf", Model(1)), kAda));
  SafetensorsFile tuned = Model(1);
  tuned.tensors["conv.weight"] = Moved(tuned.tensors["conv.weight"], 1e-3, 7);
  PushStats tuned_push;
  ASSERT_OK_AND_ASSIGN(VersionInfo v2,
                       registry_->Register(Version("clf", tuned), kAda, &tuned_push));
  ASSERT_GT(tuned_push.deltas_written, 0);  // v2's conv chunks are deltas against v1's
  PushStats other_push;
  ASSERT_OK_AND_ASSIGN(VersionInfo other,
                       registry_->Register(Version("other", Model(50)), kAda, &other_push));
  ASSERT_OK(registry_->Remove(v1.id, /*force=*/true, kRoot));
  ASSERT_OK(registry_->Remove(other.id, /*force=*/true, kRoot));
  const size_t before = StoredChunks();

  GcOptions dry = Grace(kHourMs);
  dry.dry_run = true;
  ASSERT_OK_AND_ASSIGN(GcStats counted, registry_->CollectGarbage(dry, kRoot));
  EXPECT_EQ(StoredChunks(), before);
  ASSERT_OK_AND_ASSIGN(GcStats stats, registry_->CollectGarbage(Grace(kHourMs), kRoot));

  // Only the removed model's chunks go: v1's are the bases v2's deltas decode against.
  EXPECT_EQ(stats.chunks_removed, other_push.chunks_written);
  EXPECT_EQ(counted.chunks_removed, stats.chunks_removed);
  EXPECT_EQ(stats.chunks_young, 0);
  EXPECT_EQ(StoredChunks(), before - static_cast<size_t>(other_push.chunks_written));
  ASSERT_OK_AND_ASSIGN(VersionInfo again, registry_->Get(v2.id));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile pulled, registry_->PullWeights(again));
  ExpectSameFile(pulled, tuned);
  ASSERT_OK_AND_ASSIGN(GcStats second, registry_->CollectGarbage(Grace(kHourMs), kRoot));
  EXPECT_EQ(second.chunks_removed, 0);
}

TEST_P(RegistryGcTest, ChunksYoungerThanTheGracePeriodAreKept) {
  // An interrupted push leaves chunks no version names yet: a push may still be writing them.
  auto dies = std::make_shared<StopsAfterPuts>(2);
  auto db = db::Open(database_->Uri());
  ASSERT_OK(db.status());
  ASSERT_OK_AND_ASSIGN(auto dying, Registry::Open(std::move(db).value(), dies, ""));
  EXPECT_STATUS(dying->Register(Version("clf", Model(1)), kAda), StatusCode::kUnavailable);
  auto dead_db = db::Open(database_->Uri());
  ASSERT_OK(dead_db.status());
  ASSERT_OK_AND_ASSIGN(auto reader, Registry::Open(std::move(dead_db).value(), dies, ""));

  ASSERT_OK_AND_ASSIGN(GcStats kept, reader->CollectGarbage(Grace(24 * kHourMs), kRoot));
  EXPECT_EQ(kept.chunks_removed, 0);
  EXPECT_EQ(kept.chunks_young, 2);
  ASSERT_OK_AND_ASSIGN(GcStats gone, reader->CollectGarbage(Grace(0), kRoot));
  EXPECT_EQ(gone.chunks_removed, 2);
}

TEST_P(RegistryGcTest, OnlyAnAdminCollects) {
  EXPECT_STATUS(registry_->CollectGarbage(Grace(0), kAda), StatusCode::kPermissionDenied);
  EXPECT_STATUS(registry_->CollectGarbage(Grace(-1), kRoot), StatusCode::kInvalidArgument);
}

TEST_P(RegistryGcTest, ASecondCollectionWhileOneRunsIsRefused) {
  ASSERT_OK(registry_->Register(Version("clf", Model(1)), kAda).status());
  std::unique_ptr<Registry> other = Open();
  Status second;
  SyncPoint& sp = SyncPoint::Get();
  bool first = true;
  sp.SetCallback("Registry::CollectGarbage:Marked", [&] {
    if (std::exchange(first, false)) second = other->CollectGarbage(Grace(0), kRoot).status();
  });
  sp.EnableProcessing();
  ASSERT_OK(registry_->CollectGarbage(Grace(0), kRoot).status());
  EXPECT_STATUS(second, StatusCode::kFailedPrecondition);
  EXPECT_NE(second.message().find("root"), std::string::npos) << second.message();
  sp.Reset();
  EXPECT_OK(other->CollectGarbage(Grace(0), kRoot).status());  // the lease was released
}

TEST_P(RegistryGcTest, APushWhoseReusedChunkIsCollectedPushesAgain) {
  // v1's chunks, unreferenced once v1 is removed, are old: the collector may take them.
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, registry_->Register(Version("clf", Model(1)), kAda));
  ASSERT_OK(registry_->Remove(v1.id, /*force=*/true, kRoot));
  const size_t stored = StoredChunks();

  // The same weights again: the push finds every chunk stored and writes none. Between the push
  // and its commit, a collection (another process) removes them all.
  std::unique_ptr<Registry> collector = Open();
  SyncPoint& sp = SyncPoint::Get();
  GcStats collected;
  bool first = true;
  sp.SetCallback("Registry::Register:Pushed", [&] {
    if (std::exchange(first, false)) {
      auto s = collector->CollectGarbage(Grace(0), kRoot);
      REEL_CHECK(s.ok()) << s.status().ToString();
      collected = *s;
    }
  });
  sp.EnableProcessing();
  PushStats push;
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, registry_->Register(Version("clf", Model(1)), kAda, &push));
  EXPECT_EQ(sp.Count("Registry::Register:Pushed"), 2);  // the commit saw the collection
  sp.Reset();

  EXPECT_EQ(collected.chunks_removed, static_cast<int64_t>(stored));
  EXPECT_EQ(push.chunks_written, static_cast<int>(stored));  // the second push stored them anew
  ASSERT_OK_AND_ASSIGN(SafetensorsFile pulled, registry_->PullWeights(v2));
  ExpectSameFile(pulled, Model(1));
}

INSTANTIATE_TEST_SUITE_P(Sqlite, RegistryGcTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, RegistryGcTest, ::testing::Values("postgres"));

}  // namespace
}  // namespace reel::registry
