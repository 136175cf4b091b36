#include "loader/sample_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dataset/shard_writer.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::loader {
namespace {

// `shards` shards of uneven sizes; labels cycle through `classes` (or follow `label_of`).
SplitCatalog MakeCatalog(const std::vector<int>& sizes, int classes = 3) {
  SplitCatalog c;
  int k = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    c.shards.push_back(static_cast<uint32_t>(s));
    std::vector<int> labels;
    for (int r = 0; r < sizes[s]; ++r) labels.push_back(k++ % classes);
    c.labels.push_back(labels);
  }
  return c;
}

std::vector<std::vector<SampleRef>> PlanAllRanks(const SplitCatalog& c, PlanOptions o) {
  std::vector<std::vector<SampleRef>> plans;
  for (int r = 0; r < o.world_size; ++r) {
    o.rank = r;
    auto plan = PlanEpoch(c, o);
    EXPECT_OK(plan);
    plans.push_back(*plan);
  }
  return plans;
}

TEST(SamplePlanTest, EverySampleExactlyOncePerEpochAcrossRanks) {
  SplitCatalog c = MakeCatalog({17, 5, 30, 12, 1, 25});  // 90 samples
  for (int world : {1, 2, 3}) {
    PlanOptions o;
    o.world_size = world;
    o.seed = 42;
    o.epoch = 3;
    o.shuffle_buffer = 8;
    o.batch_size = 5;  // 90 = 1*90 = 2*45 = 3*30: divisible, so no padding is needed
    auto plans = PlanAllRanks(c, o);
    std::multiset<std::pair<uint32_t, uint32_t>> seen;
    for (const auto& plan : plans) {
      EXPECT_EQ(plan.size(), 90u / world);
      for (const auto& s : plan) seen.insert({s.shard, s.record});
    }
    EXPECT_EQ(seen.size(), 90u);
    std::set<std::pair<uint32_t, uint32_t>> unique(seen.begin(), seen.end());
    EXPECT_EQ(unique.size(), 90u) << "world " << world;
  }
}

TEST(SamplePlanTest, PaddingAndDroppingGiveEqualWholeBatchesOnEveryRank) {
  SplitCatalog c = MakeCatalog({7, 9, 4});  // 20 samples
  PlanOptions o;
  o.world_size = 3;
  o.batch_size = 4;
  o.shuffle_buffer = 4;
  auto padded = PlanAllRanks(c, o);
  std::map<std::pair<uint32_t, uint32_t>, int> times;
  for (const auto& plan : padded) {
    EXPECT_EQ(plan.size(), 8u);  // ceil(20 / 12) = 2 batches of 4
    for (const auto& s : plan) ++times[{s.shard, s.record}];
  }
  EXPECT_EQ(times.size(), 20u);  // every sample at least once
  int repeats = 0;
  for (const auto& [ref, n] : times) repeats += n - 1;
  EXPECT_EQ(repeats, 4);  // 24 slots for 20 samples

  o.remainder = Remainder::kDrop;
  auto dropped = PlanAllRanks(c, o);
  std::set<std::pair<uint32_t, uint32_t>> unique;
  for (const auto& plan : dropped) {
    EXPECT_EQ(plan.size(), 4u);  // floor(20 / 12) = 1 batch of 4
    for (const auto& s : plan) EXPECT_TRUE(unique.insert({s.shard, s.record}).second);
  }
  o.batch_size = 8;  // 24 > 20: dropping leaves nothing
  EXPECT_STATUS(PlanEpoch(c, o), StatusCode::kInvalidArgument);
}

TEST(SamplePlanTest, DeterministicForSeedAndEpochAndDifferentAcrossEpochs) {
  SplitCatalog c = MakeCatalog({50, 50, 50, 50});
  PlanOptions o;
  o.world_size = 2;
  o.rank = 1;
  o.seed = 7;
  o.epoch = 0;
  auto a = PlanEpoch(c, o);
  auto b = PlanEpoch(c, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  o.epoch = 1;
  auto next = PlanEpoch(c, o);
  EXPECT_NE(*a, *next);
  o.epoch = 0;
  o.seed = 8;
  EXPECT_NE(*a, PlanEpoch(c, o).value());
  o.shuffle = false;  // stream order: rank 1 takes the second half in order
  auto ordered = PlanEpoch(c, o).value();
  EXPECT_EQ(ordered.front().shard, 2u);
  EXPECT_EQ(ordered.front().record, 0u);
  EXPECT_EQ(ordered.back().shard, 3u);
  EXPECT_EQ(ordered.back().record, 49u);
}

TEST(SamplePlanTest, EachRankReadsFewShards) {
  SplitCatalog c = MakeCatalog(std::vector<int>(40, 25));  // 40 shards of 25
  PlanOptions o;
  o.world_size = 4;
  o.shuffle_buffer = 100;
  for (const auto& plan : PlanAllRanks(c, o)) {
    std::set<uint32_t> shards;
    for (const auto& s : plan) shards.insert(s.shard);
    EXPECT_LE(shards.size(), 11u);  // 10 shards' worth, plus one shared at an edge
  }
}

TEST(SamplePlanTest, ShuffleBufferReordersWithinARank) {
  SplitCatalog c = MakeCatalog({1000});
  PlanOptions o;
  o.shuffle_buffer = 64;
  auto plan = PlanEpoch(c, o).value();
  int displaced = 0;
  for (size_t i = 0; i < plan.size(); ++i) displaced += plan[i].record != i;
  EXPECT_GT(displaced, 900);
  o.shuffle_buffer = 1;
  plan = PlanEpoch(c, o).value();
  for (size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(plan[i].record, i);
}

TEST(SamplePlanTest, ClassBalancedModeOversamplesRareClasses) {
  // 900 samples of class 0, 100 of class 1, in 10 shards.
  SplitCatalog c;
  for (uint32_t s = 0; s < 10; ++s) {
    c.shards.push_back(s);
    std::vector<int> labels(100, 0);
    for (int r = 0; r < 10; ++r) labels[static_cast<size_t>(r * 10)] = 1;
    c.labels.push_back(labels);
  }
  PlanOptions o;
  o.class_balanced = true;
  o.world_size = 2;
  o.seed = 5;
  std::map<int, int> counts;
  auto plans = PlanAllRanks(c, o);
  for (const auto& plan : plans) {
    EXPECT_EQ(plan.size(), 500u);
    for (const auto& s : plan) ++counts[s.label];
  }
  EXPECT_NEAR(counts[1], 500, 75);       // about half, although only a tenth of the data
  EXPECT_EQ(plans, PlanAllRanks(c, o));  // still deterministic
  o.class_balanced = false;
  counts.clear();
  for (const auto& plan : PlanAllRanks(c, o)) {
    for (const auto& s : plan) ++counts[s.label];
  }
  EXPECT_EQ(counts[1], 100);  // the default stays exactly once
}

// What each rank of `o.world_size` takes in the segment after `o.before`: the first `take` of
// its plan (all of it for take < 0).
std::vector<SampleRef> Take(const SplitCatalog& c, PlanOptions o, int64_t take) {
  std::vector<SampleRef> out;
  for (const auto& plan : PlanAllRanks(c, o)) {
    const size_t n = take < 0 ? plan.size() : std::min(plan.size(), static_cast<size_t>(take));
    out.insert(out.end(), plan.begin(), plan.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return out;
}

TEST(SamplePlanTest, AResizedEpochStillReadsEverySampleOnce) {
  SplitCatalog c = MakeCatalog({17, 5, 30, 12, 1, 25, 30});  // 120 samples
  PlanOptions o;
  o.seed = 5;
  o.epoch = 2;
  o.shuffle_buffer = 8;
  o.batch_size = 2;
  // 4 ranks take 10 each, then 2 ranks 14 each, then 3 ranks read the rest.
  std::vector<SampleRef> read;
  o.world_size = 4;
  auto part = Take(c, o, 10);
  read.insert(read.end(), part.begin(), part.end());
  o.before = {{4, 10}};
  o.world_size = 2;
  ASSERT_OK_AND_ASSIGN(uint64_t per_rank, SamplesPerRank(c, o));
  EXPECT_EQ(per_rank, 40u);  // the 80 left, over 2 ranks
  part = Take(c, o, 14);
  read.insert(read.end(), part.begin(), part.end());
  o.before.push_back({2, 14});
  o.world_size = 3;
  ASSERT_OK_AND_ASSIGN(per_rank, SamplesPerRank(c, o));
  EXPECT_EQ(per_rank, 18u);  // 52 left: 3 ranks x 9 batches of 2 = 54, padded by 2
  part = Take(c, o, -1);
  read.insert(read.end(), part.begin(), part.end());
  std::map<std::pair<uint32_t, uint32_t>, int> times;
  for (const auto& s : read) ++times[{s.shard, s.record}];
  EXPECT_EQ(times.size(), 120u) << "a sample was skipped";
  int repeats = 0;
  for (const auto& [sample, n] : times) repeats += n - 1;
  EXPECT_EQ(repeats, 2) << "only the last segment's padding repeats";

  // Without padding nothing repeats: the same, dropping the last segment's remainder.
  o.remainder = Remainder::kDrop;
  ASSERT_OK_AND_ASSIGN(per_rank, SamplesPerRank(c, o));
  EXPECT_EQ(per_rank, 16u);
  // A segment that took more than its plan held is refused.
  o.before.back().position = 41;
  EXPECT_STATUS(PlanEpoch(c, o), StatusCode::kInvalidArgument);
}

TEST(SamplePlanTest, TheSegmentsOfAnEpochDoNotChangeItsFirstSegment) {
  SplitCatalog c = MakeCatalog({17, 5, 30, 12, 1, 25});
  PlanOptions o;
  o.seed = 9;
  o.world_size = 2;
  o.batch_size = 3;
  auto plain = PlanEpoch(c, o);
  ASSERT_OK(plain);
  o.before = {};
  auto same = PlanEpoch(c, o);
  ASSERT_OK(same);
  EXPECT_EQ(*plain, *same);
  // An epoch fully read before the resize leaves nothing: with kDrop 0 per rank.
  o.remainder = Remainder::kDrop;
  o.before = {{2, 45}};
  ASSERT_OK_AND_ASSIGN(uint64_t per_rank, SamplesPerRank(c, o));
  EXPECT_EQ(per_rank, 0u);
}

TEST(SamplePlanTest, OptionsAreValidated) {
  SplitCatalog c = MakeCatalog({10});
  PlanOptions o;
  o.world_size = 2;
  o.rank = 2;
  EXPECT_STATUS(PlanEpoch(c, o), StatusCode::kInvalidArgument);
  o.rank = 0;
  o.batch_size = 0;
  EXPECT_STATUS(PlanEpoch(c, o), StatusCode::kInvalidArgument);
  EXPECT_STATUS(PlanEpoch(SplitCatalog{}, PlanOptions{}), StatusCode::kInvalidArgument);
}

TEST(LoaderStateTest, JsonRoundTripAndErrors) {
  LoaderState s{123456789012345ull, 7, 4096};
  auto back = LoaderState::FromJson(s.ToJson());
  ASSERT_OK(back);
  EXPECT_EQ(back->seed, s.seed);
  EXPECT_EQ(back->epoch, 7);
  EXPECT_EQ(back->position, 4096u);
  EXPECT_EQ(back->world_size, 0);
  EXPECT_TRUE(back->before.empty());
  LoaderState resized{1, 2, 8, 3, {{4, 16}, {2, 6}}};
  ASSERT_OK_AND_ASSIGN(LoaderState again, LoaderState::FromJson(resized.ToJson()));
  EXPECT_EQ(again.world_size, 3);
  EXPECT_EQ(again.before, resized.before);
  EXPECT_STATUS(LoaderState::FromJson(R"({"seed": 1, "epoch": 0, "position": 0, "world_size": 0})"),
                StatusCode::kDataLoss);
  EXPECT_STATUS(LoaderState::FromJson(R"({"seed": 1, "epoch": 0, "position": 0, "before": [[2]]})"),
                StatusCode::kDataLoss);
  EXPECT_STATUS(LoaderState::FromJson("{\"seed\": 1}"), StatusCode::kDataLoss);
  EXPECT_STATUS(LoaderState::FromJson("nonsense"), StatusCode::kDataLoss);
}

TEST(SplitCatalogTest, ReadsShardIndexes) {
  storage::MemoryStore store;
  dataset::ShardWriterOptions wo;
  wo.mode = dataset::DatasetMode::kFrames;
  wo.target_bytes = 16384;  // a few records per shard
  auto writer = dataset::ShardWriter::Create(store, "ds", "train", wo);
  ASSERT_OK(writer);
  for (int i = 0; i < 12; ++i) {
    dataset::Record r;
    r.key = "k" + std::to_string(i);
    r.label = i % 4;
    r.label_name = "c" + std::to_string(i % 4);
    r.payload = std::string(1500, static_cast<char>(i));
    r.payload_ext = "frames.zst";
    ASSERT_OK((*writer)->AddRecord(r));
  }
  ASSERT_OK((*writer)->Finish());
  auto catalog = SplitCatalog::FromIndexes(store, "ds", "train");
  ASSERT_OK(catalog);
  EXPECT_GT(catalog->shards.size(), 1u);
  EXPECT_EQ(catalog->size(), 12u);
  std::vector<int> labels;  // in shard order, then record order: as written
  for (const auto& shard : catalog->labels) labels.insert(labels.end(), shard.begin(), shard.end());
  ASSERT_EQ(labels.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(labels[static_cast<size_t>(i)], i % 4);
}

}  // namespace
}  // namespace reel::loader
