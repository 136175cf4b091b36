#include "dataset/manifest.h"

#include <gtest/gtest.h>

#include "dataset/shard_reader.h"
#include "dataset/testing/records.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using nlohmann::json;
using testing::MakeRecord;
using testing::StoreKind;
using testing::TestStore;

class ManifestTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  ManifestTest() : store_(GetParam()) {}
  storage::ObjectStore& store() { return store_.get(); }

  // Writes a small two-split dataset under "ds" and returns its (unwritten) manifest.
  Manifest BuildDataset() {
    Manifest m;
    m.name = "tiny";
    m.mode = DatasetMode::kVideo;
    m.classes = {"class0", "class1", "class2", "class3"};
    m.clip_settings = {{"clip_frames", 16}, {"stride", 8}, {"fps", 25}, {"short_side", 128}};
    m.source_hash = "sha256:abc123";
    auto keys = std::make_shared<KeyRegistry>();
    int next = 0;
    for (auto [split, count] : {std::pair<const char*, int>{"train", 20}, {"val", 5}}) {
      ShardWriterOptions options;
      options.target_bytes = 16 * 1024;
      options.keys = keys;
      auto writer = ShardWriter::Create(store(), "ds", split, options);
      EXPECT_OK(writer);
      for (int i = 0; i < count; ++i) {
        EXPECT_OK((*writer)->AddRecord(MakeRecord(next++, 3000)));
      }
      EXPECT_OK((*writer)->Finish());
      EXPECT_OK(m.AddSplit(split, (*writer)->shards()));
    }
    return m;
  }

  TestStore store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, ManifestTest,
                         ::testing::Values(StoreKind::kMemory, StoreKind::kLocal),
                         [](const auto& param) { return testing::StoreKindName(param.param); });

TEST_P(ManifestTest, RoundTripThroughTheStore) {
  Manifest m = BuildDataset();
  const SplitInfo& train = m.splits.at("train");
  EXPECT_EQ(train.records, 20u);
  EXPECT_EQ(train.class_counts, (std::vector<uint64_t>{7, 7, 6, 0}));
  EXPECT_GT(train.shards.size(), 2u);
  EXPECT_EQ(m.splits.at("val").records, 5u);
  ASSERT_OK(m.Validate());
  Status written = m.Write(store(), "ds");
  ASSERT_OK(written);

  auto read = Manifest::Read(store(), "ds/");
  ASSERT_OK(read);
  EXPECT_EQ(read->format_version, 1);
  EXPECT_EQ(read->name, "tiny");
  EXPECT_EQ(read->mode, DatasetMode::kVideo);
  EXPECT_EQ(read->classes, m.classes);
  EXPECT_EQ(read->clip_settings, m.clip_settings);
  EXPECT_EQ(read->source_hash, "sha256:abc123");
  ASSERT_EQ(read->splits.size(), 2u);
  for (const auto& [split, info] : m.splits) {
    const SplitInfo& got = read->splits.at(split);
    EXPECT_EQ(got.records, info.records);
    EXPECT_EQ(got.bytes, info.bytes);
    EXPECT_EQ(got.class_counts, info.class_counts);
    ASSERT_EQ(got.shards.size(), info.shards.size());
    for (size_t i = 0; i < got.shards.size(); ++i) {
      EXPECT_EQ(got.shards[i].name, info.shards[i].name);
      EXPECT_EQ(got.shards[i].records, info.shards[i].records);
      EXPECT_EQ(got.shards[i].tar_bytes, info.shards[i].tar_bytes);
      EXPECT_EQ(got.shards[i].index_bytes, info.shards[i].index_bytes);
      // Every shard the manifest names opens.
      auto number = ParseShardName(got.shards[i].name);
      ASSERT_TRUE(number);
      EXPECT_OK(ShardReader::Open(store(), "ds", split, *number));
    }
  }
  // Serialisation is deterministic, and the stored text is what Serialize gives.
  auto text = m.Serialize();
  ASSERT_OK(text);
  EXPECT_EQ(*read->Serialize(), *text);
  EXPECT_EQ(*store().Get("ds/manifest.json"), *text);
  // The documented top-level keys.
  json doc = json::parse(*text);
  for (const char* key : {"format", "format_version", "name", "mode", "classes", "clip_settings",
                          "source_hash", "splits"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_EQ(doc["format"], "reel-dataset");
  EXPECT_EQ(doc["splits"]["train"]["shards"][0]["name"], "shard-000000");
}

TEST_P(ManifestTest, CreateRefusesAnExistingDatasetReplaceOverwrites) {
  Manifest m = BuildDataset();
  ASSERT_OK(m.Write(store(), "ds"));
  Status again = m.Write(store(), "ds");
  EXPECT_STATUS(again, StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("already exists"), std::string::npos);
  m.source_hash = "changed";
  ManifestWriteOptions replace;
  replace.mode = ManifestWriteMode::kReplace;
  ASSERT_OK(m.Write(store(), "ds", replace));
  EXPECT_EQ(Manifest::Read(store(), "ds")->source_hash, "changed");
}

TEST_P(ManifestTest, WriteVerifiesTheShards) {
  Manifest m = BuildDataset();
  // A shard whose index is gone.
  ASSERT_OK(store().Delete("ds/train/shard-000001.idx"));
  Status s = m.Write(store(), "ds");
  EXPECT_STATUS(s, StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("ds/train/shard-000001.idx is missing"), std::string::npos)
      << s.message();
  EXPECT_STATUS(store().Head("ds/manifest.json"), StatusCode::kNotFound);
  // A shard of another size.
  Manifest other = m;
  other.splits.erase("train");
  other.splits.at("val").shards[0].tar_bytes += 512;
  other.splits.at("val").bytes += 512;
  s = other.Write(store(), "ds");
  EXPECT_STATUS(s, StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("bytes"), std::string::npos);
  // Without verification it is written.
  ManifestWriteOptions trusting;
  trusting.verify_shards = false;
  EXPECT_OK(m.Write(store(), "ds", trusting));
}

TEST_P(ManifestTest, MissingManifestIsNotFound) {
  auto missing = Manifest::Read(store(), "nothing/here");
  EXPECT_STATUS(missing, StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "no Reel dataset at " + ObjectUri(store(), "nothing/here") + ": manifest.json missing");
  auto at_root = Manifest::Read(store(), "");
  EXPECT_EQ(at_root.status().message(),
            "no Reel dataset at " + store().uri() + ": manifest.json missing");
  EXPECT_STATUS(Manifest::Read(store(), "/abs"), StatusCode::kInvalidArgument);
}

TEST_P(ManifestTest, StoredErrorsAreReported) {
  Manifest m = BuildDataset();
  ASSERT_OK(m.Write(store(), "ds"));
  const json good = json::parse(*store().Get("ds/manifest.json"));
  auto read_with = [&](const std::string& text) {
    EXPECT_OK(store().Put("ds/manifest.json", text));
    return Manifest::Read(store(), "ds").status();
  };
  // Malformed JSON: DataLoss with the parser's message and the manifest's URI.
  Status s = read_with("{\"format\": ");
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("parse error"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(ObjectUri(store(), "ds/manifest.json")), std::string::npos);
  // Versions other than 1.
  for (int version : {0, 2, 99}) {
    json doc = good;
    doc["format_version"] = version;
    s = read_with(doc.dump());
    EXPECT_STATUS(s, StatusCode::kFailedPrecondition) << version;
    EXPECT_NE(s.message().find("version " + std::to_string(version)), std::string::npos);
  }
  // Not a Reel manifest.
  json doc = good;
  doc["format"] = "something-else";
  EXPECT_STATUS(read_with(doc.dump()), StatusCode::kDataLoss);
  // Missing and mistyped fields name the field.
  doc = good;
  doc.erase("classes");
  s = read_with(doc.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("classes: missing"), std::string::npos) << s.message();
  doc = good;
  doc["splits"]["train"]["records"] = "many";
  s = read_with(doc.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("splits.train.records: expected an unsigned integer, got string"),
            std::string::npos)
      << s.message();
  doc = good;
  doc["splits"]["train"]["shards"][0]["tar_bytes"] = -5;
  s = read_with(doc.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("splits.train.shards[0].tar_bytes"), std::string::npos) << s.message();
  doc = good;
  doc["mode"] = "audio";
  EXPECT_STATUS(read_with(doc.dump()), StatusCode::kDataLoss);
  // Inconsistent counts.
  doc = good;
  doc["splits"]["train"]["records"] = 21;
  s = read_with(doc.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("split 'train' counts 21 records"), std::string::npos) << s.message();
  doc = good;
  doc["splits"]["val"]["class_counts"] = json::array({5});
  EXPECT_STATUS(read_with(doc.dump()), StatusCode::kDataLoss);
  doc = good;
  doc["classes"][1] = "class0";
  EXPECT_STATUS(read_with(doc.dump()), StatusCode::kDataLoss);
  doc = good;
  doc["clip_settings"] = 3;
  EXPECT_STATUS(read_with(doc.dump()), StatusCode::kDataLoss);
  // Unknown fields are tolerated (forward compatible within a version).
  doc = good;
  doc["future_field"] = {{"x", 1}};
  EXPECT_OK(read_with(doc.dump()));
}

TEST(ManifestValidationTest, AddSplitAndValidateRefuseInconsistentInput) {
  Manifest m;
  m.name = "x";
  m.classes = {"a", "b"};
  ShardStats s0;
  s0.split = "train";
  s0.number = 0;
  s0.records = 3;
  s0.tar_bytes = 4096;
  s0.index_bytes = 100;
  s0.class_counts = {1, 2};
  ShardStats s1 = s0;
  s1.number = 1;
  s1.class_counts = {0, 0, 3};  // label 2: no such class
  EXPECT_STATUS(m.AddSplit("train", {s0, s1}), StatusCode::kInvalidArgument);
  EXPECT_STATUS(m.AddSplit("train", {s0, s0}), StatusCode::kInvalidArgument);
  EXPECT_STATUS(m.AddSplit("val", {s0}), StatusCode::kInvalidArgument);  // s0 is train's
  EXPECT_STATUS(m.AddSplit("bad/name", {}), StatusCode::kInvalidArgument);
  ShardStats s2 = s0;
  s2.number = 5;
  ASSERT_OK(m.AddSplit("train", {s2, s0}));  // sorted by number
  EXPECT_EQ(m.splits["train"].shards[0].name, "shard-000000");
  EXPECT_EQ(m.splits["train"].shards[1].name, "shard-000005");
  EXPECT_EQ(m.splits["train"].records, 6u);
  EXPECT_EQ(m.splits["train"].bytes, 8192u);
  EXPECT_STATUS(m.AddSplit("train", {}), StatusCode::kInvalidArgument);  // already there
  ASSERT_OK(m.Validate());
  ASSERT_OK(m.AddSplit("empty", {}));  // a split without records is allowed
  EXPECT_OK(m.Validate());

  Manifest bad = m;
  bad.name.clear();
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);
  bad = m;
  bad.classes.push_back("a");
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);
  bad = m;
  bad.splits["train"].records = 7;
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);
  bad = m;
  std::swap(bad.splits["train"].shards[0], bad.splits["train"].shards[1]);
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);
  bad = m;
  bad.clip_settings = json::array();
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);
  bad = m;
  bad.format_version = 2;
  EXPECT_STATUS(bad.Serialize(), StatusCode::kInvalidArgument);
  bad = m;
  bad.source_hash = std::string("\xff", 1);
  EXPECT_STATUS(bad.Serialize(), StatusCode::kInvalidArgument);

  // Features: the width is required, written and read back; other modes carry none.
  Manifest features = m;
  features.mode = DatasetMode::kFeatures;
  EXPECT_STATUS(features.Validate(), StatusCode::kInvalidArgument);  // no features.dim
  features.features = {{"dim", 0}};
  EXPECT_STATUS(features.Validate(), StatusCode::kInvalidArgument);
  features.features = {{"dim", 128}, {"layer", "avgpool"}};
  ASSERT_OK_AND_ASSIGN(std::string text, features.Serialize());
  ASSERT_OK_AND_ASSIGN(Manifest back, Manifest::Parse(text));
  EXPECT_EQ(back.mode, DatasetMode::kFeatures);
  EXPECT_EQ(back.feature_dim(), 128);
  EXPECT_EQ(back.features["layer"], "avgpool");
  bad = m;
  bad.features = {{"dim", 128}};
  EXPECT_STATUS(bad.Validate(), StatusCode::kInvalidArgument);  // a video dataset
  json doc = json::parse(text);
  doc["features"] = "wide";
  EXPECT_STATUS(Manifest::Parse(doc.dump()), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace reel::dataset
