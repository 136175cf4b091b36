// The loader reading a dataset on S3 (the Ceph radosgw of the ctest fixture "ceph") through the
// read-through cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "ingest/testing/datagen_dataset.h"
#include "loader/loader.h"
#include "storage/caching_store.h"
#include "storage/open.h"
#include "storage/s3_store.h"
#include "storage/testing/ceph_env.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::loader {
namespace {

TEST(LoaderS3Test, ReadsAnS3DatasetExactlyOncePerEpochThroughTheCache) {
  ASSERT_TRUE(storage::testing::LoadCephEnvironment()) << "run through ctest (fixture 'ceph')";
  const std::string bucket = "reel-loader-" + std::to_string(::getpid());
  auto options = storage::S3Options::FromEnvironment();
  ASSERT_OK(options);
  {
    auto s3 = storage::S3Store::Open(bucket, "", *options);
    ASSERT_TRUE(s3.ok() && (*s3)->CreateBucket().ok());
  }
  ingest::testing::DatagenDataset d;
  d.videos_per_class = 2;
  ASSERT_OK_AND_ASSIGN(ingest::IngestReport report, ingest::testing::MakeDatagenDataset(
                                                        "loader-s3", "s3://" + bucket + "/ds", d));

  reel::testing::TempDir dir_owner;
  const std::string dir = dir_owner.path();
  auto s3 = storage::S3Store::Open(bucket, "ds", *options);
  ASSERT_OK(s3);
  storage::S3Store* server = s3->get();
  storage::CacheOptions co;
  co.directory = dir;
  co.max_bytes = 256 << 20;
  auto cache = storage::CachingStore::Open(std::move(*s3), co);
  ASSERT_OK(cache);

  std::multiset<std::string> keys;
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o;
    o.batch_size = 2;
    o.clip.frames = 4;
    o.transform.size = 16;
    o.plan.world_size = 2;
    o.plan.rank = rank;
    o.plan.remainder = Remainder::kDrop;
    auto loader = Loader::Open(**cache, o);
    ASSERT_OK(loader);
    while (true) {
      auto batch = (*loader)->Next();
      ASSERT_OK(batch);
      if (!batch->has_value()) break;
      for (const auto& key : (*batch)->keys) keys.insert(key);
    }
    EXPECT_EQ((*loader)->stats().corrupt_records, 0u);
  }
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  EXPECT_GE(keys.size(), static_cast<size_t>(report.clips["train"] - 3));

  // A second pass is served by the cache: no request reaches the server.
  uint64_t before = server->stats().requests;
  LoaderOptions o;
  o.batch_size = 2;
  o.clip.frames = 4;
  o.transform.size = 16;
  auto again = Loader::Open(**cache, o);
  ASSERT_OK(again);
  while (true) {
    auto batch = (*again)->Next();
    ASSERT_OK(batch);
    if (!batch->has_value()) break;
  }
  // Only listing the split's shards goes to the server; manifest, indexes and shards are cached.
  EXPECT_EQ(server->stats().requests - before, 1u);
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace reel::loader
