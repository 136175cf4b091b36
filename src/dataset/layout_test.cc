#include "dataset/layout.h"

#include <gtest/gtest.h>

#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

TEST(LayoutTest, KeysOfADataset) {
  EXPECT_EQ(ManifestKey(""), "manifest.json");
  EXPECT_EQ(ManifestKey("ds/ucf"), "ds/ucf/manifest.json");
  EXPECT_EQ(ShardName(0), "shard-000000");
  EXPECT_EQ(ShardName(123), "shard-000123");
  EXPECT_EQ(ShardName(1234567), "shard-1234567");
  EXPECT_EQ(ShardTarKey("ds", "train", 7), "ds/train/shard-000007.tar");
  EXPECT_EQ(ShardIndexKey("", "val", 7), "val/shard-000007.idx");
  EXPECT_EQ(SplitPrefix("a/b", "test"), "a/b/test/");
}

TEST(LayoutTest, ParseShardNameAcceptsOnlyCanonicalNames) {
  EXPECT_EQ(ParseShardName("shard-000123"), 123u);
  EXPECT_EQ(ParseShardName("shard-000123.tar"), 123u);
  EXPECT_EQ(ParseShardName("shard-000123.idx"), 123u);
  EXPECT_EQ(ParseShardName("shard-1234567.idx"), 1234567u);
  EXPECT_EQ(ParseShardName("shard-4294967295"), 4294967295u);
  EXPECT_FALSE(ParseShardName("shard-4294967296"));
  EXPECT_FALSE(ParseShardName("shard-00123"));    // too few digits
  EXPECT_FALSE(ParseShardName("shard-0001234"));  // not canonical
  EXPECT_FALSE(ParseShardName("shard-00012a"));
  EXPECT_FALSE(ParseShardName("shard-000123.tmp"));
  EXPECT_FALSE(ParseShardName("Shard-000123"));
  EXPECT_FALSE(ParseShardName(""));
  for (uint32_t n : {0u, 1u, 999999u, 1000000u, 4294967295u}) {
    EXPECT_EQ(ParseShardName(ShardName(n)), n);
  }
}

TEST(LayoutTest, SampleKeys) {
  EXPECT_OK(ValidateSampleKey("v_ApplyEyeMakeup_g01_c01-0003"));
  EXPECT_OK(ValidateSampleKey("a+b=c@d,e"));
  EXPECT_OK(ValidateSampleKey(std::string(kMaxSampleKeyBytes, 'k')));
  for (std::string bad :
       {std::string(), std::string(kMaxSampleKeyBytes + 1, 'k'), std::string("a.b"),
        std::string("a/b"), std::string("a b"), std::string("a\0b", 3), std::string("é")}) {
    Status s = ValidateSampleKey(bad);
    EXPECT_STATUS(s, StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LayoutTest, SanitizeGivesValidDistinctKeys) {
  EXPECT_EQ(SanitizeSampleKey("clip 01.mp4"), "clip_01_mp4");
  EXPECT_EQ(SanitizeSampleKey(""), "_");
  EXPECT_EQ(SanitizeSampleKey("ok-key"), "ok-key");
  std::string long_a(200, 'a'), long_b = long_a;
  long_b[150] = 'b';
  std::string a = SanitizeSampleKey(long_a), b = SanitizeSampleKey(long_b);
  EXPECT_EQ(a.size(), kMaxSampleKeyBytes);
  EXPECT_OK(ValidateSampleKey(a));
  EXPECT_OK(ValidateSampleKey(b));
  EXPECT_NE(a, b);
  EXPECT_OK(ValidateSampleKey(SanitizeSampleKey("ünïcode/../x")));
}

TEST(LayoutTest, SplitsRootsAndModes) {
  EXPECT_OK(ValidateSplitName("train"));
  EXPECT_OK(ValidateSplitName("fold_1-val"));
  EXPECT_FALSE(ValidateSplitName("").ok());
  EXPECT_FALSE(ValidateSplitName("a/b").ok());
  EXPECT_FALSE(ValidateSplitName("..").ok());
  EXPECT_EQ(*NormalizeRoot("ds/ucf//"), "ds/ucf");
  EXPECT_EQ(*NormalizeRoot(""), "");
  EXPECT_EQ(*NormalizeRoot("/"), "");
  EXPECT_STATUS(NormalizeRoot("/abs"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(NormalizeRoot("a/../b"), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseDatasetMode("video"), DatasetMode::kVideo);
  EXPECT_EQ(*ParseDatasetMode("frames"), DatasetMode::kFrames);
  EXPECT_STATUS(ParseDatasetMode("audio"), StatusCode::kInvalidArgument);
  EXPECT_EQ(PayloadExtension(DatasetMode::kFrames), "frames.zst");
  EXPECT_EQ(*ModeOfExtension("mp4"), DatasetMode::kVideo);
  EXPECT_FALSE(ModeOfExtension("zst").ok());
  EXPECT_EQ(*ParseDatasetMode("features"), DatasetMode::kFeatures);
  EXPECT_EQ(DatasetModeName(DatasetMode::kFeatures), "features");
  EXPECT_EQ(PayloadExtension(DatasetMode::kFeatures), "f32");
  EXPECT_EQ(*ModeOfExtension("f32"), DatasetMode::kFeatures);
  storage::MemoryStore store("x");
  EXPECT_EQ(ObjectUri(store, "a/b"), "mem://x/a/b");
}

}  // namespace
}  // namespace reel::dataset
