// The loader over a real dataset: datagen videos ingested into a memory store.
#include "loader/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "datagen/datagen.h"
#include "dataset/layout.h"
#include "dataset/shard_reader.h"
#include "ingest/pipeline.h"
#include "storage/caching_store.h"
#include "storage/memory_store.h"
#include "storage/open.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::loader {
namespace {

using ::testing::HasSubstr;

// A dataset in each mode, made once: 8 classes x 4 videos, 8-frame clips, short side 32.
storage::MemoryStore& Dataset(dataset::DatasetMode mode) {
  static std::map<dataset::DatasetMode, std::unique_ptr<storage::MemoryStore>> made;
  auto& store = made[mode];
  if (!store) {
    static bool generated = [] {
      auto raw = storage::OpenStore("mem://loader-raw");
      datagen::DatagenOptions o;
      o.videos_per_class = 4;
      o.width = 48;
      o.height = 40;
      o.show_progress = false;
      return datagen::GenerateDataset(**raw, "ucf", o, 2).ok();
    }();
    EXPECT_TRUE(generated);
    store = std::make_unique<storage::MemoryStore>(std::string(dataset::DatasetModeName(mode)));
    ingest::IngestOptions io;
    io.source = "mem://loader-raw/ucf";
    io.output_store = store.get();
    io.encode.mode = mode;
    io.clip.clip_frames = 8;
    io.clip.short_side = 32;
    io.shard_bytes = 64 << 10;
    io.progress = false;
    auto report = ingest::RunIngest(io);
    EXPECT_OK(report);
  }
  return *store;
}

LoaderOptions Options() {
  LoaderOptions o;
  o.batch_size = 4;
  o.clip.frames = 4;
  o.clip.stride = 2;
  o.transform.size = 24;
  o.plan.seed = 11;
  o.plan.shuffle_buffer = 16;
  o.threads = 2;
  return o;
}

std::vector<Batch> Epoch(Loader& loader) {
  std::vector<Batch> batches;
  while (true) {
    auto batch = loader.Next();
    EXPECT_OK(batch);
    if (!batch.ok() || !batch->has_value()) break;
    batches.push_back(std::move(**batch));
  }
  return batches;
}

TEST(LoaderTest, BatchesHaveTheModelsLayoutAndEveryTrainClipOncePerEpochAcrossRanks) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  auto catalog = SplitCatalog::FromIndexes(store, "", "train");
  ASSERT_OK(catalog);
  const uint64_t n = catalog->size();
  for (int world = 1; world <= 3; ++world) {
    std::multiset<std::string> keys;
    size_t batches_per_rank = 0;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = Options();
      o.plan.world_size = world;
      o.plan.rank = rank;
      o.plan.remainder = Remainder::kDrop;
      auto loader = Loader::Open(store, o);
      ASSERT_OK(loader);
      auto batches = Epoch(**loader);
      if (rank == 0) batches_per_rank = batches.size();
      EXPECT_EQ(batches.size(), batches_per_rank);  // the same number on every rank
      EXPECT_EQ(batches.size(), (*loader)->batches_per_epoch());
      for (const Batch& b : batches) {
        EXPECT_EQ(b.shape, (std::array<int64_t, 5>{4, 3, 4, 24, 24}));
        EXPECT_EQ(b.f32.size(), 4u * 3 * 4 * 24 * 24);
        for (const auto& k : b.keys) keys.insert(k);
        for (int label : b.labels) EXPECT_TRUE(label >= 0 && label < 8);
      }
      EXPECT_EQ((*loader)->class_names().size(), 8u);
    }
    std::set<std::string> unique(keys.begin(), keys.end());
    EXPECT_EQ(unique.size(), keys.size()) << "a clip came twice in one epoch, world " << world;
    const uint64_t unit = 4u * static_cast<uint64_t>(world);
    EXPECT_EQ(keys.size(), n - n % unit) << "world " << world;  // all but the dropped remainder
  }
}

TEST(LoaderTest, BatchesDoNotDependOnTheThreadCount) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  LoaderOptions o = Options();
  o.threads = 1;
  auto one = Loader::Open(store, o);
  o.threads = 4;
  o.prefetch_batches = 4;
  auto three = Loader::Open(store, o);
  ASSERT_TRUE(one.ok() && three.ok());
  auto a = Epoch(**one), b = Epoch(**three);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].keys, b[i].keys);
    EXPECT_TRUE(a[i].f32 == b[i].f32) << "batch " << i;
  }
}

TEST(LoaderTest, ResumingMidEpochGivesTheRemainingBatchesExactly) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  LoaderOptions o = Options();
  auto full = Loader::Open(store, o);
  ASSERT_OK(full);
  ASSERT_OK((*full)->Start(LoaderState{o.plan.seed, 2, 0}));
  auto expected = Epoch(**full);
  ASSERT_GT(expected.size(), 3u);

  auto first = Loader::Open(store, o);
  ASSERT_OK((*first)->Start(LoaderState{o.plan.seed, 2, 0}));
  ASSERT_OK((*first)->Next());
  ASSERT_OK((*first)->Next());
  std::string saved = (*first)->state().ToJson();  // what a checkpoint would keep

  auto resumed = Loader::Open(store, o);
  auto state = LoaderState::FromJson(saved);
  ASSERT_OK(state);
  ASSERT_OK((*resumed)->Start(*state));
  auto rest = Epoch(**resumed);
  ASSERT_EQ(rest.size(), expected.size() - 2);
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(rest[i].keys, expected[i + 2].keys);
    EXPECT_TRUE(rest[i].f32 == expected[i + 2].f32);
    EXPECT_EQ(rest[i].index, expected[i + 2].index);
  }
  EXPECT_STATUS((*resumed)->Start(LoaderState{o.plan.seed + 1, 2, 0}),
                StatusCode::kInvalidArgument);
  EXPECT_STATUS((*resumed)->Start(LoaderState{o.plan.seed, 2, 3}), StatusCode::kInvalidArgument);
}

// An elastic job: 2 ranks read a batch each, are shrunk to 1 rank that reads 2 more, then grown
// to 3 that read the rest of the epoch, each time resuming from rank 0's saved state.
TEST(LoaderTest, AnElasticJobResizedMidEpochReadsEveryClipOnce) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  ASSERT_OK_AND_ASSIGN(SplitCatalog catalog, SplitCatalog::FromIndexes(store, "", "train"));
  std::multiset<std::string> keys;
  std::string saved = LoaderState{11, 1, 0}.ToJson();
  // Each rank of `world` resumes from `saved`, reads `batches` (all for -1); rank 0's state is
  // saved for the next resize.
  const auto segment = [&](int world, int batches) {
    std::string next;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = Options();
      o.plan.world_size = world;
      o.plan.rank = rank;
      ASSERT_OK_AND_ASSIGN(auto loader, Loader::Open(store, o));
      ASSERT_OK_AND_ASSIGN(LoaderState state, LoaderState::FromJson(saved));
      ASSERT_OK(loader->Start(state));
      for (int i = 0; i < batches || batches < 0; ++i) {
        ASSERT_OK_AND_ASSIGN(std::optional<Batch> batch, loader->Next());
        if (!batch) break;
        keys.insert(batch->keys.begin(), batch->keys.end());
      }
      if (rank == 0) next = loader->state().ToJson();
    }
    saved = next;
  };
  segment(2, 1);
  segment(1, 2);
  ASSERT_OK_AND_ASSIGN(LoaderState shrunk, LoaderState::FromJson(saved));
  EXPECT_EQ(shrunk.world_size, 1);
  EXPECT_EQ(shrunk.before, (std::vector<PlanSegment>{{2, 4}}));
  segment(3, -1);
  std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), catalog.size()) << "a clip was skipped";
  EXPECT_LT(keys.size() - unique.size(), 3u * 4) << "repeats beyond the last segment's padding";
}

TEST(LoaderTest, VideoModeClipsDecodeToUint8Batches) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kVideo);
  LoaderOptions o = Options();
  o.transform.normalize = false;
  o.transform.train = false;
  o.clip.clips_per_video = 2;  // multi-clip evaluation
  o.split = "test";
  auto loader = Loader::Open(store, o);
  ASSERT_OK(loader);
  auto batch = (*loader)->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().ToString();
  const Batch& b = **batch;
  EXPECT_EQ(b.shape, (std::array<int64_t, 5>{8, 3, 4, 24, 24}));
  EXPECT_EQ(b.u8.size(), 8u * 3 * 4 * 24 * 24);
  EXPECT_EQ(b.labels[0], b.labels[1]);  // two clips of one video
  EXPECT_EQ(b.keys[0], b.keys[1]);
  uint64_t sum = 0;
  for (uint8_t v : b.u8) sum += v;
  EXPECT_GT(sum, 0u);
}

// Flips one byte inside a record's payload: that record fails its checksum, is counted and
// replaced, and the batch keeps its shape.
TEST(LoaderTest, ACorruptRecordIsSkippedCountedAndReplaced) {
  storage::MemoryStore& source = Dataset(dataset::DatasetMode::kFrames);
  storage::MemoryStore copy("corrupt");
  auto objects = storage::ListAll(source, "");
  ASSERT_OK(objects);
  for (const auto& object : *objects)
    ASSERT_OK(copy.Put(object.key, source.Get(object.key).value()));
  std::string tar = copy.Get("train/shard-000000.tar").value();
  tar[512 + 100] ^= 0x5a;  // inside the first member's data (after its 512-byte header)
  ASSERT_OK(copy.Put("train/shard-000000.tar", tar));

  LoaderOptions o = Options();
  o.plan.shuffle = false;               // the corrupt record comes first
  o.plan.remainder = Remainder::kDrop;  // no padding: each record once
  auto loader = Loader::Open(copy, o);
  ASSERT_OK(loader);
  auto batches = Epoch(**loader);
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ((*loader)->stats().corrupt_records, 1u);
  EXPECT_EQ(batches[0].shape[0], 4);
  ASSERT_EQ(batches[0].keys.size(), 4u);
  // The corrupt first sample's slot holds a copy of the first good one: its values and key.
  const Batch& b = batches[0];
  EXPECT_EQ(b.keys[0], b.keys[1]);
  EXPECT_EQ(b.labels[0], b.labels[1]);
  const size_t values = (b.f32.empty() ? b.u8.size() : b.f32.size()) / 4;
  if (!b.f32.empty()) {
    EXPECT_TRUE(std::equal(b.f32.begin(), b.f32.begin() + values, b.f32.begin() + values));
  } else {
    EXPECT_TRUE(std::equal(b.u8.begin(), b.u8.begin() + values, b.u8.begin() + values));
  }
}

// Counts whole-object reads of shard tars, the requests a cache exists to save.
class CountingStore : public storage::MemoryStore {
 public:
  using MemoryStore::MemoryStore;
  Result<std::string> Get(std::string_view key, storage::ObjectInfo* info = nullptr) override {
    if (key.size() > 4 && key.substr(key.size() - 4) == ".tar") ++tar_gets;
    return MemoryStore::Get(key, info);
  }
  std::atomic<int> tar_gets{0};
};

TEST(LoaderTest, ThroughACacheEachShardIsFetchedOnceAndPrefetched) {
  storage::MemoryStore& source = Dataset(dataset::DatasetMode::kFrames);
  auto counting = std::make_unique<CountingStore>("counting");
  CountingStore* inner = counting.get();
  auto objects = storage::ListAll(source, "");
  ASSERT_OK(objects);
  for (const auto& object : *objects)
    ASSERT_OK(inner->Put(object.key, source.Get(object.key).value()));
  reel::testing::TempDir dir_owner;
  const std::string dir = dir_owner.path();
  storage::CacheOptions co;
  co.directory = dir;
  co.max_bytes = 256 << 20;
  auto cache = storage::CachingStore::Open(std::move(counting), co);
  ASSERT_OK(cache);
  auto shards = dataset::ListShards(**cache, "", "train");
  ASSERT_OK(shards);
  ASSERT_GT(shards->size(), 2u);

  LoaderOptions o = Options();
  o.threads = 3;
  auto loader = Loader::Open(**cache, o);
  ASSERT_OK(loader);
  auto first = Epoch(**loader);
  EXPECT_EQ(inner->tar_gets.load(), static_cast<int>(shards->size()));  // once each, no duplicates
  ASSERT_OK((*loader)->Start(LoaderState{o.plan.seed, 1, 0}));
  auto second = Epoch(**loader);
  EXPECT_EQ(second.size(), first.size());
  EXPECT_EQ(inner->tar_gets.load(),
            static_cast<int>(shards->size()));  // the next epoch: all cached
  std::system((std::string("rm -rf ") + dir).c_str());
}

// Frame t of clip b in a B x C x T x H x W uint8 batch, as bytes (all channels).
std::string FrameOf(const Batch& batch, int64_t b, int64_t t) {
  const int64_t c = batch.shape[1], frames = batch.shape[2],
                plane = batch.shape[3] * batch.shape[4];
  std::string out;
  for (int64_t ch = 0; ch < c; ++ch) {
    const uint8_t* p = batch.u8.data() + ((b * c + ch) * frames + t) * plane;
    out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(plane));
  }
  return out;
}

TEST(LoaderTest, AReversedSampleTakesItsPairedLabel) {
  LoaderOptions plain = Options();
  plain.transform.normalize = false;
  plain.transform.flip = false;
  plain.transform.min_scale = plain.transform.max_scale = 1.0;  // the whole frame: no crop draws
  plain.transform.min_ratio = plain.transform.max_ratio = 1.0;  // that could differ
  LoaderOptions reversing = plain;
  reversing.transform.reverse = true;
  reversing.reverse_pairs = {{"MoveLeft", "MoveRight"}, {"Grow", "Shrink"}};
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  ASSERT_OK_AND_ASSIGN(auto a, Loader::Open(store, plain));
  ASSERT_OK_AND_ASSIGN(auto b, Loader::Open(store, reversing));
  const std::vector<std::string>& names = a->class_names();
  auto paired = [&](int label) -> int {
    const std::map<std::string, std::string> to = {{"MoveLeft", "MoveRight"},
                                                   {"MoveRight", "MoveLeft"},
                                                   {"Grow", "Shrink"},
                                                   {"Shrink", "Grow"}};
    auto it = to.find(names[static_cast<size_t>(label)]);
    if (it == to.end()) return label;
    return static_cast<int>(std::find(names.begin(), names.end(), it->second) - names.begin());
  };
  std::vector<Batch> forwards = Epoch(*a), maybe_backwards = Epoch(*b);
  ASSERT_EQ(forwards.size(), maybe_backwards.size());
  int reversed = 0, kept = 0, swapped = 0;
  for (size_t i = 0; i < forwards.size(); ++i) {
    const Batch &f = forwards[i], &r = maybe_backwards[i];
    const int64_t frames = f.shape[2];
    for (int64_t j = 0; j < f.shape[0]; ++j) {
      ASSERT_EQ(f.keys[static_cast<size_t>(j)], r.keys[static_cast<size_t>(j)]);
      const int label = f.labels[static_cast<size_t>(j)];
      const int got = r.labels[static_cast<size_t>(j)];
      if (FrameOf(f, j, 0) == FrameOf(r, j, 0)) {
        ++kept;
        EXPECT_EQ(got, label);
        continue;
      }
      ++reversed;
      for (int64_t t = 0; t < frames; ++t)
        EXPECT_EQ(FrameOf(r, j, t), FrameOf(f, j, frames - 1 - t));
      EXPECT_EQ(got, paired(label)) << names[static_cast<size_t>(label)];
      swapped += got != label;
    }
  }
  EXPECT_GT(reversed, 0);
  EXPECT_GT(kept, 0);
  EXPECT_GT(swapped, 0);
}

TEST(LoaderTest, LabelPairsNameClassesOfTheDataset) {
  storage::MemoryStore& store = Dataset(dataset::DatasetMode::kFrames);
  LoaderOptions o = Options();
  o.flip_pairs = {{"MoveLeft", "Sideways"}};
  auto unknown = Loader::Open(store, o);
  EXPECT_STATUS(unknown, StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("flip_pairs: the dataset has no class 'Sideways'"));
  o.flip_pairs = {{"MoveLeft", "MoveRight"}, {"MoveRight", "Grow"}};
  EXPECT_STATUS(Loader::Open(store, o), StatusCode::kInvalidArgument);
  o.flip_pairs = {};
  o.reverse_pairs = {{"Grow", "Grow"}};
  auto itself = Loader::Open(store, o);
  EXPECT_THAT(itself.status().message(),
              HasSubstr("reverse_pairs: class 'Grow' paired with itself"));
}

TEST(LoaderTest, OpenErrors) {
  storage::MemoryStore empty;
  EXPECT_STATUS(Loader::Open(empty, Options()), StatusCode::kNotFound);
  LoaderOptions o = Options();
  o.split = "holdout";
  EXPECT_STATUS(Loader::Open(Dataset(dataset::DatasetMode::kFrames), o), StatusCode::kNotFound);
  o = Options();
  o.batch_size = 0;
  EXPECT_STATUS(Loader::Open(Dataset(dataset::DatasetMode::kFrames), o),
                StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace reel::loader
