// ShardWriter against MemoryStore and LocalStore: rolling at the target size, publishing order
// and listing, resuming after finished shards, record validation, frames mode, failing stores.
#include "dataset/shard_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "dataset/frames_codec.h"
#include "dataset/layout.h"
#include "dataset/shard_reader.h"
#include "dataset/shard_test_util.h"
#include "dataset/tar.h"
#include "dataset/testing/records.h"
#include "media/frame.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::dataset {
namespace {

using nlohmann::json;
using testing::MakeRecord;
using testing::NewWriter;
using testing::OpenShard;
using testing::ShardTest;
using testing::StoreKind;
using testing::TestStore;

constexpr uint64_t kMiB = 1 << 20;

// Bytes a record adds to a shard, as the writer computes them.
uint64_t RecordBytes(const Record& r) {
  json meta = r.metadata;
  meta["key"] = r.key;
  meta["label"] = r.label_name;
  meta["label_index"] = r.label;
  meta["checksum"] = "xxh3:" + Xxh3Hex(Xxh3_64(r.payload));
  return TarWriter::MemberBytes(r.key + "." + r.payload_ext, r.payload.size()) +
         TarWriter::MemberBytes(r.key + ".cls", std::to_string(r.label).size()) +
         TarWriter::MemberBytes(r.key + ".json", meta.dump().size());
}

// The one instantiation of ShardTest, for its tests here and in shard_reader_test.cc.
INSTANTIATE_TEST_SUITE_P(Stores, ShardTest,
                         ::testing::Values(StoreKind::kMemory, StoreKind::kLocal),
                         [](const auto& param) { return testing::StoreKindName(param.param); });

TEST_P(ShardTest, RollsAtTheTargetSize) {
  std::vector<Record> records;
  for (int i = 0; i < 50; ++i) records.push_back(MakeRecord(i, 100 * 1024));
  const uint64_t per_record = RecordBytes(records[0]);
  for (const Record& r : records) ASSERT_EQ(RecordBytes(r), per_record);  // same-size metadata
  ShardWriterOptions options;
  options.target_bytes = kMiB;
  std::vector<ShardStats> shards = WriteAll(records, options);

  // A shard takes as many records as fit with the end-of-archive marker.
  const uint64_t per_shard = (kMiB - kTarEndBytes) / per_record;
  ASSERT_EQ(per_shard, 9u);
  const size_t expected_shards = (50 + per_shard - 1) / per_shard;
  ASSERT_EQ(shards.size(), expected_shards);
  uint64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const ShardStats& st = shards[s];
    EXPECT_EQ(st.number, s);
    EXPECT_EQ(st.name, ShardName(s));
    EXPECT_EQ(st.split, "train");
    EXPECT_EQ(st.tar_key, "ds/train/" + ShardName(s) + ".tar");
    EXPECT_EQ(st.index_key, "ds/train/" + ShardName(s) + ".idx");
    const uint64_t want_records = s + 1 < shards.size() ? per_shard : 50 - per_shard * s;
    EXPECT_EQ(st.records, want_records);
    EXPECT_EQ(st.tar_bytes, want_records * per_record + kTarEndBytes);
    EXPECT_LE(st.tar_bytes, options.target_bytes);
    EXPECT_LE(st.tar_bytes, options.target_bytes + per_record);
    auto tar = store().Head(st.tar_key);
    ASSERT_OK(tar);
    EXPECT_EQ(tar->size, st.tar_bytes);
    auto idx = store().Head(st.index_key);
    ASSERT_OK(idx);
    EXPECT_EQ(idx->size, st.index_bytes);
    total += st.records;
  }
  EXPECT_EQ(total, 50u);
  auto listed = ListShards(store(), "ds", "train");
  ASSERT_OK(listed);
  EXPECT_EQ(listed->size(), expected_shards);
}

TEST_P(ShardTest, DefaultTargetIs128MiBAndAnOversizedRecordGetsItsOwnShard) {
  EXPECT_EQ(ShardWriterOptions().target_bytes, 128 * kMiB);
  ShardWriterOptions options;
  options.target_bytes = 64 * 1024;
  std::vector<Record> records = {MakeRecord(0, 10000), MakeRecord(1, 200000), MakeRecord(2, 10000),
                                 MakeRecord(3, 10000)};
  std::vector<ShardStats> shards = WriteAll(records, options);
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[0].records, 1u);
  EXPECT_EQ(shards[1].records, 1u);
  EXPECT_GT(shards[1].tar_bytes, options.target_bytes);
  EXPECT_EQ(shards[2].records, 2u);
}

TEST_P(ShardTest, TarWithoutIndexIsUnfinishedAndNotListed) {
  std::vector<Record> records;
  for (int i = 0; i < 30; ++i) records.push_back(MakeRecord(i, 4000));
  ShardWriterOptions options;
  options.target_bytes = 32 * 1024;
  std::vector<ShardStats> shards = WriteAll(records, options);
  ASSERT_GE(shards.size(), 4u);
  ASSERT_OK(store().Delete(shards[1].index_key));
  // A stray tar from a crashed run, an index without its tar, and unrelated objects.
  ASSERT_OK(store().Put("ds/train/shard-000050.tar", "partial"));
  ASSERT_OK(store().Put("ds/train/shard-000060.idx", "{}"));
  ASSERT_OK(store().Put("ds/train/notes.txt", "x"));
  ASSERT_OK(store().Put("ds/train/sub/shard-000002.tar", "x"));
  ASSERT_OK(store().Put("ds/train/sub/shard-000002.idx", "x"));
  auto listed = ListShards(store(), "ds", "train");
  ASSERT_OK(listed);
  std::vector<uint32_t> want;
  for (const ShardStats& s : shards) {
    if (s.number != 1) want.push_back(s.number);
  }
  EXPECT_EQ(*listed, want);
  auto unfinished = ShardReader::Open(store(), "ds", "train", 1);
  EXPECT_STATUS(unfinished, StatusCode::kNotFound);
  EXPECT_NE(unfinished.status().message().find("unfinished"), std::string::npos);
  auto stats = LoadShardStats(store(), "ds", "train");
  ASSERT_OK(stats);
  EXPECT_EQ(stats->size(), want.size());
  auto empty = ListShards(store(), "ds", "val");
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST_P(ShardTest, WriterDestroyedBeforeFinishPublishesNothingOfTheOpenShard) {
  ShardWriterOptions options;
  options.target_bytes = 24 * 1024;
  {
    auto writer = NewWriter(store(), options);
    for (int i = 0; i < 7; ++i) ASSERT_OK(writer->AddRecord(MakeRecord(i, 5000)));
    ASSERT_EQ(writer->shards().size(), 2u);  // 3 records per shard; the third shard is open
    EXPECT_EQ(writer->records(), 7u);
  }
  auto listed = ListShards(store(), "ds", "train");
  ASSERT_OK(listed);
  EXPECT_EQ(*listed, (std::vector<uint32_t>{0, 1}));
  EXPECT_STATUS(store().Head("ds/train/shard-000002.tar"), StatusCode::kNotFound);
  EXPECT_STATUS(store().Head("ds/train/shard-000002.idx"), StatusCode::kNotFound);
}

TEST_P(ShardTest, ResumesAfterFinishedShards) {
  std::vector<Record> records;
  for (int i = 0; i < 20; ++i) records.push_back(MakeRecord(i, 5000));
  ShardWriterOptions options;
  options.target_bytes = 24 * 1024;  // 3 records per shard

  // A complete run, for comparison.
  TestStore reference(GetParam());
  {
    auto writer = NewWriter(*reference, options);
    for (const Record& r : records) ASSERT_OK(writer->AddRecord(r));
    ASSERT_OK(writer->Finish());
  }
  // A run that dies after 10 records: shards 0..2 published (9 records), shard 3 open.
  {
    auto writer = NewWriter(store(), options);
    for (int i = 0; i < 10; ++i) ASSERT_OK(writer->AddRecord(records[i]));
  }
  // Simulate a crash that left shard 3's tar behind and a stale index for shard 4.
  ASSERT_OK(store().Put("ds/train/shard-000003.tar", "torn"));
  ASSERT_OK(store().Put("ds/train/shard-000004.idx", "stale"));

  auto keys = std::make_shared<KeyRegistry>();
  auto done = LoadShardStats(store(), "ds", "train", keys.get());
  ASSERT_OK(done);
  ASSERT_EQ(done->size(), 3u);
  EXPECT_EQ(keys->size(), 9u);
  uint64_t finished_records = 0;
  for (const ShardStats& s : *done) finished_records += s.records;
  ASSERT_EQ(finished_records, 9u);

  ShardWriterOptions resume = options;
  resume.first_shard = static_cast<uint32_t>(done->size());
  resume.keys = keys;
  std::vector<ShardStats> published;
  resume.on_shard_published = [&](const ShardStats& s) { published.push_back(s); };
  auto writer = NewWriter(store(), resume);
  // Keys of finished shards are refused.
  EXPECT_STATUS(writer->AddRecord(records[0]), StatusCode::kAlreadyExists);
  ASSERT_OK(writer->AddRecord(records[finished_records]));
  // Shard 3 is being rewritten; shard 4's stale index disappears when shard 4 opens.
  EXPECT_FALSE(store().Head("ds/train/shard-000003.idx").ok());
  for (size_t i = finished_records + 1; i < records.size(); ++i) {
    ASSERT_OK(writer->AddRecord(records[i]));
  }
  ASSERT_OK(writer->Finish());
  EXPECT_EQ(published.size(), writer->shards().size());
  EXPECT_EQ(writer->shards().front().number, 3u);

  // The resumed dataset is byte-identical to the uninterrupted one.
  auto all = ListShards(store(), "ds", "train");
  auto ref = ListShards(*reference, "ds", "train");
  ASSERT_TRUE(all.ok() && ref.ok());
  EXPECT_EQ(*all, *ref);
  for (uint32_t n : *all) {
    auto a = store().Get(ShardTarKey("ds", "train", n));
    auto b = reference->Get(ShardTarKey("ds", "train", n));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(*a == *b) << n;
    auto ia = store().Get(ShardIndexKey("ds", "train", n));
    auto ib = reference->Get(ShardIndexKey("ds", "train", n));
    ASSERT_TRUE(ia.ok() && ib.ok());
    EXPECT_EQ(*ia, *ib) << n;
  }
}

TEST_P(ShardTest, RecordsAreValidated) {
  auto registry = std::make_shared<KeyRegistry>();
  ShardWriterOptions options;
  options.keys = registry;
  auto writer = NewWriter(store(), options);
  auto code_of = [&](Record r) { return writer->AddRecord(r).code(); };
  Record ok = MakeRecord(1, 100);
  Record r = ok;
  r.key = "bad.key";
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.key = std::string(kMaxSampleKeyBytes + 1, 'k');
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.label = -1;
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.label_name.clear();
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.payload_ext = "frames.zst";  // the writer is in video mode
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.metadata = json::array({1, 2});
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.metadata["label"] = "other";
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.metadata["checksum"] = "xxh3:0000000000000000";
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  r = ok;
  r.metadata["note"] = std::string("\xff\xfe", 2);  // not UTF-8
  EXPECT_EQ(code_of(r), StatusCode::kInvalidArgument);
  // Matching owned fields and null metadata are fine.
  r = ok;
  r.metadata["label"] = ok.label_name;
  r.metadata["label_index"] = ok.label;
  ASSERT_OK(writer->AddRecord(r));
  Record bare = MakeRecord(2, 100);
  bare.metadata = nullptr;
  ASSERT_OK(writer->AddRecord(bare));
  EXPECT_EQ(code_of(ok), StatusCode::kAlreadyExists);
  // None of the refusals broke the writer.
  ASSERT_OK(writer->Finish());
  ASSERT_EQ(writer->shards().size(), 1u);
  EXPECT_EQ(writer->shards()[0].records, 2u);
  EXPECT_STATUS(writer->AddRecord(MakeRecord(3, 1)), StatusCode::kFailedPrecondition);
  EXPECT_STATUS(writer->Finish(), StatusCode::kFailedPrecondition);

  // The registry is shared: the validation split cannot reuse a training key.
  auto val = NewWriter(store(), options, "ds", "val");
  EXPECT_STATUS(val->AddRecord(ok), StatusCode::kAlreadyExists);
  ASSERT_OK(val->AddRecord(MakeRecord(9, 10)));

  EXPECT_STATUS(ShardWriter::Create(store(), "ds", "a/b"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(ShardWriter::Create(store(), "/abs", "train"), StatusCode::kInvalidArgument);
  ShardWriterOptions tiny;
  tiny.target_bytes = 100;
  EXPECT_STATUS(ShardWriter::Create(store(), "ds", "train", tiny), StatusCode::kInvalidArgument);
}

TEST_P(ShardTest, EmptyWriterPublishesNothingAndRootCanBeEmpty) {
  auto writer = NewWriter(store(), {}, "", "test");
  ASSERT_OK(writer->Finish());
  EXPECT_TRUE(writer->shards().empty());
  auto at_root = NewWriter(store(), {}, "", "test");
  ASSERT_OK(at_root->AddRecord(MakeRecord(0, 10)));
  ASSERT_OK(at_root->Finish());
  EXPECT_OK(store().Head("test/shard-000000.tar"));
  auto shard = OpenShard(store(), 0, "", "test");
  ASSERT_TRUE(shard);
  EXPECT_OK(shard->ReadRecord(0));
}

TEST_P(ShardTest, FramesModeStoresFramesPayloads) {
  ShardWriterOptions options;
  options.mode = DatasetMode::kFrames;
  auto writer = NewWriter(store(), options);
  std::vector<media::Frame> frames;
  for (int t = 0; t < 4; ++t) {
    media::Frame f = media::Frame::Make(16, 12);
    for (size_t b = 0; b < f.data.size(); ++b) f.data[b] = static_cast<uint8_t>(b + t);
    frames.push_back(std::move(f));
  }
  auto payload = EncodeFrames(frames);
  ASSERT_OK(payload);
  Record r = MakeRecord(0, 0, 3, "frames.zst");
  r.payload = *payload;
  ASSERT_OK(writer->AddRecord(r));
  EXPECT_STATUS(writer->AddRecord(MakeRecord(1, 10)), StatusCode::kInvalidArgument);  // mp4
  ASSERT_OK(writer->Finish());
  auto shard = OpenShard(store(), 0);
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard->index().records[0].members[0].name, "clip-0000.frames.zst");
  auto back = shard->ReadRecord(0);
  ASSERT_OK(back);
  EXPECT_EQ(back->payload_ext, "frames.zst");
  auto decoded = DecodeFramesToFrames(back->payload);
  ASSERT_OK(decoded);
  ASSERT_EQ(decoded->size(), 4u);
  EXPECT_EQ((*decoded)[3].data, frames[3].data);
}

// A store whose Put / OpenWriter fail for keys with a given suffix, to test publishing order.
class FailingStore : public storage::MemoryStore {
 public:
  std::string fail_suffix;
  bool fail_close = false;
  Status Put(std::string_view key, std::string_view data) override {
    if (Matches(key)) return UnavailableError("injected failure for " + std::string(key));
    return MemoryStore::Put(key, data);
  }
  Result<std::unique_ptr<storage::ObjectWriter>> OpenWriter(std::string_view key) override {
    if (Matches(key)) return UnavailableError("injected failure for " + std::string(key));
    return MemoryStore::OpenWriter(key);
  }

 private:
  bool Matches(std::string_view key) const {
    return !fail_suffix.empty() && key.size() >= fail_suffix.size() &&
           key.substr(key.size() - fail_suffix.size()) == fail_suffix;
  }
};

TEST(ShardWriterFailureTest, IndexPutFailureLeavesAnUnlistedShardAndBreaksTheWriter) {
  FailingStore store;
  ShardWriterOptions options;
  options.target_bytes = 24 * 1024;  // 3 records per shard
  auto writer = NewWriter(store, options);
  for (int i = 0; i < 3; ++i) ASSERT_OK(writer->AddRecord(MakeRecord(i, 5000)));
  store.fail_suffix = "shard-000000.idx";
  Status s = writer->AddRecord(MakeRecord(3, 5000));  // rolls: publishes shard 0
  EXPECT_STATUS(s, StatusCode::kUnavailable);
  EXPECT_EQ(writer->AddRecord(MakeRecord(4, 5000)), s);
  EXPECT_EQ(writer->Finish(), s);
  EXPECT_OK(store.Head("ds/train/shard-000000.tar"));  // the tar made it ...
  auto listed = ListShards(store, "ds", "train");
  ASSERT_OK(listed);
  EXPECT_TRUE(listed->empty());  // ... but without its index nobody sees it
}

TEST(ShardWriterFailureTest, TarOpenFailureIsReported) {
  FailingStore store;
  store.fail_suffix = ".tar";
  auto writer = NewWriter(store, {});
  EXPECT_STATUS(writer->AddRecord(MakeRecord(0, 10)), StatusCode::kUnavailable);
  EXPECT_STATUS(writer->Finish(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace reel::dataset
