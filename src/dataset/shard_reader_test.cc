// ShardReader against MemoryStore and LocalStore: reading back by index and by iteration, ranged
// reads at the index's offsets, checksums, corrupt and truncated tars, bad indexes.
#include "dataset/shard_reader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/hash.h"
#include "dataset/layout.h"
#include "dataset/record.h"
#include "dataset/shard_test_util.h"
#include "dataset/shard_writer.h"
#include "dataset/testing/records.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using nlohmann::json;
using testing::MakeRecord;
using testing::NewWriter;
using testing::OpenShard;
using testing::ShardTest;

void ExpectSameRecord(const Record& got, const Record& want) {
  EXPECT_EQ(got.key, want.key);
  EXPECT_EQ(got.label, want.label);
  EXPECT_EQ(got.label_name, want.label_name);
  EXPECT_EQ(got.payload_ext, want.payload_ext);
  EXPECT_TRUE(got.payload == want.payload) << want.key;
  for (const auto& [field, value] : want.metadata.items()) {
    EXPECT_EQ(got.metadata.value(field, json()), value) << want.key << " " << field;
  }
  EXPECT_EQ(got.metadata["key"], want.key);
  EXPECT_EQ(got.metadata["label"], want.label_name);
  EXPECT_EQ(got.metadata["label_index"], want.label);
  EXPECT_EQ(got.metadata["checksum"], "xxh3:" + Xxh3Hex(Xxh3_64(want.payload)));
}

TEST_P(ShardTest, EveryRecordReadsBackByIndexAndByIteration) {
  std::vector<Record> records;
  for (int i = 0; i < 40; ++i) records.push_back(MakeRecord(i, 1000 + 3137 * (i % 7)));
  records[5].payload.clear();  // an empty payload is allowed
  ShardWriterOptions options;
  options.target_bytes = 40 * 1024;
  std::vector<ShardStats> shards = WriteAll(records, options);
  ASSERT_GT(shards.size(), 3u);
  size_t next = 0;
  for (const ShardStats& st : shards) {
    auto shard = OpenShard(store(), st.number);
    ASSERT_TRUE(shard);
    EXPECT_EQ(shard->num_records(), st.records);
    EXPECT_EQ(shard->index().tar_bytes, st.tar_bytes);
    EXPECT_EQ(shard->index_bytes(), st.index_bytes);
    ShardStats again = shard->Stats();
    EXPECT_EQ(again.class_counts, st.class_counts);
    EXPECT_EQ(again.records, st.records);
    for (size_t i = 0; i < shard->num_records(); ++i) {
      auto r = shard->ReadRecord(i);
      ASSERT_OK(r);
      ExpectSameRecord(*r, records[next + i]);
      EXPECT_EQ(shard->Find(records[next + i].key), i);
    }
    auto it = shard->Iterate();
    ASSERT_OK(it);
    Record r;
    size_t n = 0;
    while (true) {
      Result<bool> more = (*it)->Next(&r);
      ASSERT_OK(more);
      if (!*more) break;
      ExpectSameRecord(r, records[next + n]);
      ++n;
    }
    EXPECT_EQ(n, st.records);
    next += n;
    EXPECT_FALSE(shard->Find("nope"));
    EXPECT_STATUS(shard->ReadRecord(shard->num_records()), StatusCode::kOutOfRange);
  }
  EXPECT_EQ(next, records.size());
}

TEST_P(ShardTest, IndexOffsetsAllowRangedReadsAndOneRecordIsOneRequest) {
  std::vector<Record> records;
  for (int i = 0; i < 12; ++i) records.push_back(MakeRecord(i, 5000 + i));
  std::vector<ShardStats> shards = WriteAll(records, ShardWriterOptions{});
  ASSERT_EQ(shards.size(), 1u);
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  const ShardIndex& index = shard->index();
  ASSERT_EQ(index.records.size(), 12u);
  for (size_t i = 0; i < index.records.size(); ++i) {
    const IndexRecord& rec = index.records[i];
    EXPECT_EQ(rec.key, records[i].key);
    ASSERT_EQ(rec.members.size(), 3u);
    EXPECT_EQ(rec.members[0].name, rec.key + ".mp4");
    EXPECT_EQ(rec.members[1].name, rec.key + ".cls");
    EXPECT_EQ(rec.members[2].name, rec.key + ".json");
    auto payload = store().GetRange(shard->tar_key(), rec.members[0].offset, rec.members[0].size);
    ASSERT_OK(payload);
    EXPECT_TRUE(*payload == records[i].payload);
    EXPECT_EQ(Xxh3_64(*payload), rec.members[0].xxh3);
    auto cls = store().GetRange(shard->tar_key(), rec.members[1].offset, rec.members[1].size);
    ASSERT_OK(cls);
    EXPECT_EQ(*cls, std::to_string(records[i].label));
    auto meta = store().GetRange(shard->tar_key(), rec.members[2].offset, rec.members[2].size);
    ASSERT_OK(meta);
    EXPECT_EQ(json::parse(*meta)["key"], records[i].key);
  }
  // With a MemoryStore, count the requests: ReadRecord is exactly one GetRange.
  storage::MemoryStore memory;
  {
    auto writer = NewWriter(memory, {});
    for (const Record& r : records) ASSERT_OK(writer->AddRecord(r));
    ASSERT_OK(writer->Finish());
  }
  auto counted = OpenShard(memory, 0);
  ASSERT_TRUE(counted);
  const uint64_t before = memory.request_count();
  ASSERT_OK(counted->ReadRecord(7));
  EXPECT_EQ(memory.request_count() - before, 1u);
}

TEST_P(ShardTest, FlippedByteIsDataLossForThatRecordOnly) {
  std::vector<Record> records;
  for (int i = 0; i < 8; ++i) records.push_back(MakeRecord(i, 3000));
  WriteAll(records, ShardWriterOptions{});
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  const IndexRecord& victim = shard->index().records[3];
  // Corrupt one byte of record 3's payload and, separately, of record 5's .cls.
  auto tar = store().Get(shard->tar_key());
  ASSERT_OK(tar);
  std::string bad = *tar;
  bad[victim.members[0].offset + 1234] ^= 0x01;
  bad[shard->index().records[5].members[1].offset] = '9';
  ASSERT_OK(store().Put(shard->tar_key(), bad));

  for (size_t i = 0; i < records.size(); ++i) {
    auto r = shard->ReadRecord(i);
    if (i == 3 || i == 5) {
      ASSERT_FALSE(r.ok());
      EXPECT_STATUS(r, StatusCode::kDataLoss);
      const std::string& msg = r.status().message();
      EXPECT_NE(msg.find("ds/train/shard-000000.tar"), std::string::npos) << msg;
      EXPECT_NE(msg.find(records[i].key), std::string::npos) << msg;
      EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
    } else {
      ASSERT_OK(r);
      ExpectSameRecord(*r, records[i]);
    }
  }
  // Iteration reports the two records and goes on.
  auto it = shard->Iterate();
  ASSERT_OK(it);
  std::vector<std::string> good;
  int errors = 0;
  Record r;
  while (true) {
    Result<bool> more = (*it)->Next(&r);
    if (!more.ok()) {
      EXPECT_STATUS(more, StatusCode::kDataLoss);
      ++errors;
      continue;
    }
    if (!*more) break;
    good.push_back(r.key);
  }
  EXPECT_EQ(errors, 2);
  EXPECT_EQ(good.size(), 6u);
  EXPECT_EQ(std::find(good.begin(), good.end(), records[3].key), good.end());
}

TEST_P(ShardTest, CorruptTarHeaderStopsIterationButNotRandomAccess) {
  std::vector<Record> records;
  for (int i = 0; i < 4; ++i) records.push_back(MakeRecord(i, 2000));
  WriteAll(records, ShardWriterOptions{});
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  auto tar = store().Get(shard->tar_key());
  ASSERT_OK(tar);
  std::string bad = *tar;
  // The header of record 2's payload member is the block before its data.
  bad[shard->index().records[2].members[0].offset - 512 + 3] ^= 0x40;
  ASSERT_OK(store().Put(shard->tar_key(), bad));
  for (size_t i = 0; i < 4; ++i) EXPECT_OK(shard->ReadRecord(i)) << i;
  auto it = shard->Iterate();
  ASSERT_OK(it);
  Record r;
  ASSERT_TRUE(*(*it)->Next(&r));
  ASSERT_TRUE(*(*it)->Next(&r));
  Result<bool> third = (*it)->Next(&r);
  EXPECT_STATUS(third, StatusCode::kDataLoss);
  EXPECT_EQ((*it)->Next(&r).status(), third.status());  // sticky
}

TEST_P(ShardTest, TruncatedTarIsDataLoss) {
  std::vector<Record> records;
  for (int i = 0; i < 4; ++i) records.push_back(MakeRecord(i, 2000));
  WriteAll(records, ShardWriterOptions{});
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  auto tar = store().Get(shard->tar_key());
  ASSERT_OK(tar);
  const uint64_t cut = shard->index().records[3].members[0].offset + 10;
  ASSERT_OK(store().Put(shard->tar_key(), tar->substr(0, cut)));
  EXPECT_OK(shard->ReadRecord(0));
  auto last = shard->ReadRecord(3);
  EXPECT_STATUS(last, StatusCode::kDataLoss) << last.status().ToString();
  auto it = shard->Iterate();
  EXPECT_STATUS(it, StatusCode::kDataLoss);
}

TEST_P(ShardTest, BadIndexesAreRefusedOnOpen) {
  WriteAll({MakeRecord(0, 100), MakeRecord(1, 100)}, ShardWriterOptions{});
  const std::string idx_key = ShardIndexKey("ds", "train", 0);
  auto original = store().Get(idx_key);
  ASSERT_OK(original);
  json doc = json::parse(*original);

  auto open_with = [&](const std::string& text) {
    EXPECT_OK(store().Put(idx_key, text));
    return ShardReader::Open(store(), "ds", "train", 0).status();
  };
  Status s = open_with("{not json");
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("ds/train/shard-000000.idx"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("parse"), std::string::npos) << s.message();

  json newer = doc;
  newer["version"] = 2;
  EXPECT_STATUS(open_with(newer.dump()), StatusCode::kFailedPrecondition);

  json other = doc;
  other["shard"] = "shard-000001";
  EXPECT_STATUS(open_with(other.dump()), StatusCode::kDataLoss);

  json past_end = doc;
  past_end["tar_bytes"] = 1024;
  s = open_with(past_end.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("passes the end"), std::string::npos) << s.message();

  json misaligned = doc;
  misaligned["records"][0]["members"][0][1] = 513;
  EXPECT_STATUS(open_with(misaligned.dump()), StatusCode::kDataLoss);

  json wrong_key = doc;
  wrong_key["records"][0]["members"][0][0] = "clip-0001.mp4";
  EXPECT_STATUS(open_with(wrong_key.dump()), StatusCode::kDataLoss);

  json duplicate = doc;
  duplicate["records"][1] = duplicate["records"][0];
  EXPECT_STATUS(open_with(duplicate.dump()), StatusCode::kDataLoss);

  json bad_hash = doc;
  bad_hash["records"][0]["members"][0][3] = "XYZ";
  EXPECT_STATUS(open_with(bad_hash.dump()), StatusCode::kDataLoss);

  json missing = doc;
  missing.erase("records");
  s = open_with(missing.dump());
  EXPECT_STATUS(s, StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("records: missing"), std::string::npos) << s.message();

  json negative = doc;
  negative["records"][0]["label"] = -3;
  EXPECT_STATUS(open_with(negative.dump()), StatusCode::kDataLoss);

  // A .cls that disagrees with the index (index edited, data intact) fails that record only.
  json relabeled = doc;
  relabeled["records"][0]["label"] = 2;
  ASSERT_OK(open_with(relabeled.dump()));
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  EXPECT_STATUS(shard->ReadRecord(0), StatusCode::kDataLoss);
  EXPECT_OK(shard->ReadRecord(1));
}

}  // namespace
}  // namespace reel::dataset
