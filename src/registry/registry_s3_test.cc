// The registry with its weight chunks on S3, against the real Ceph radosgw that the ctest
// fixture "ceph" starts: versions push deltas there and pull bit-exact, garbage collection
// removes objects from the bucket, and a chunk lost from the bucket is DataLoss naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include "db/database.h"
#include "registry/registry.h"
#include "registry/registry_test_util.h"
#include "storage/s3_store.h"
#include "storage/testing/ceph_env.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::registry {
namespace {

TEST(RegistryS3Test, ChunksOnCephPushPullAndAreCollected) {
  ASSERT_TRUE(storage::testing::LoadCephEnvironment()) << "run through ctest (fixture 'ceph')";
  const std::string bucket = "reel-registry-" + std::to_string(::getpid());
  ASSERT_OK_AND_ASSIGN(auto options, storage::S3Options::FromEnvironment());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<storage::ObjectStore> s3,
                       storage::S3Store::Open(bucket, "registry", options));
  ASSERT_OK(s3->CreateBucket());
  reel::testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, db::OpenSqlite(dir.path() + "/registry.db"));
  RegistryOptions ro;
  ro.weights.chunk_bytes = 8192;
  ASSERT_OK_AND_ASSIGN(auto reg, Registry::Open(std::move(db), s3, "weights/", ro));

  NewVersion first;
  first.model = "clf";
  first.weights = Model(1);
  ASSERT_OK_AND_ASSIGN(VersionInfo v1, reg->Register(first, kRoot));
  NewVersion tuned = first;
  tuned.weights.tensors["conv.weight"] = Moved(first.weights.tensors["conv.weight"], 1e-3, 2);
  tuned.parents = {v1.id};
  PushStats stats;
  ASSERT_OK_AND_ASSIGN(VersionInfo v2, reg->Register(tuned, kRoot, &stats));
  EXPECT_GT(stats.deltas_written, 0);
  EXPECT_LT(stats.stored_bytes, tuned.weights.tensors["conv.weight"].data.size());
  ASSERT_OK_AND_ASSIGN(SafetensorsFile pulled, reg->PullWeights(v2));
  ExpectSameFile(pulled, tuned.weights);

  // An unrelated version, removed: the collector takes its chunks out of the bucket.
  NewVersion other = first;
  other.model = "other";
  other.weights = Model(9);
  ASSERT_OK_AND_ASSIGN(VersionInfo v3, reg->Register(other, kRoot));
  ASSERT_OK(reg->Remove(v3.id, /*force=*/true, kRoot));  // it is its branch's head
  ASSERT_OK_AND_ASSIGN(auto before, storage::ListAll(*s3, "weights/chunks/"));
  GcOptions gc;
  gc.grace_ms = 0;
  ASSERT_OK_AND_ASSIGN(GcStats collected, reg->CollectGarbage(gc, kRoot));
  ASSERT_OK_AND_ASSIGN(auto after, storage::ListAll(*s3, "weights/chunks/"));
  EXPECT_GT(collected.chunks_removed, 0);
  EXPECT_EQ(collected.chunks_missing, 0);
  EXPECT_EQ(after.size(), before.size() - static_cast<size_t>(collected.chunks_removed));
  ASSERT_OK_AND_ASSIGN(pulled, reg->PullWeights(v2));  // v1's chunks are v2's delta bases
  ExpectSameFile(pulled, tuned.weights);

  // A chunk lost from the bucket: the pull names it and its tensor.
  const std::string lost = v2.weights.tensors.at("conv.weight").chunks[0].sha256;
  ASSERT_OK(s3->Delete("weights/chunks/" + lost));
  Result<SafetensorsFile> broken = reg->PullWeights(v2);
  EXPECT_STATUS(broken, StatusCode::kDataLoss);
  EXPECT_NE(broken.status().message().find(lost), std::string::npos);
  EXPECT_NE(broken.status().message().find("conv.weight"), std::string::npos);

  ASSERT_OK_AND_ASSIGN(auto rest, storage::ListAll(*s3, ""));
  for (const auto& o : rest) ASSERT_OK(s3->Delete(o.key));
}

}  // namespace
}  // namespace reel::registry
