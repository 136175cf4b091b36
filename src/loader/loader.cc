#include "loader/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "base/check.h"
#include "base/logging.h"
#include "base/ordered_map.h"
#include "base/random.h"
#include "base/thread_pool.h"
#include "dataset/frames_codec.h"
#include "dataset/layout.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "loader/streams.h"
#include "media/decoder.h"
#include "media/input.h"
#include "storage/object_store.h"

namespace reel::loader {
namespace {

// What a worker reports of one plan entry; its values went straight into its batch's slot.
struct Sample {
  Status status;
  bool fatal = false;  // the shard itself is missing or damaged: no other sample can stand in
  int label = -1;
  std::string key;
};

// Where one sample's values go: clips_per_video clips, each C x T x H x W, or an embedding.
struct Slot {
  float* f32 = nullptr;
  uint8_t* u8 = nullptr;
};

// A record's payload as uint8 RGB frames.
Result<FrameStack> Frames(const dataset::Record& record) {
  FrameStack stack;
  if (record.payload_ext == "frames.zst") {
    REEL_ASSIGN_OR_RETURN(dataset::DecodedFrames decoded, dataset::DecodeFrames(record.payload));
    if (decoded.header.channels != 3) {
      return DataLossError("record '" + record.key + "' holds " +
                           std::to_string(decoded.header.channels) + "-channel frames, not RGB");
    }
    stack.t = static_cast<int>(decoded.header.frames);
    stack.h = static_cast<int>(decoded.header.height);
    stack.w = static_cast<int>(decoded.header.width);
    stack.pixels = std::move(decoded.pixels);
    return stack;
  }
  media::DecodeOptions options;
  options.format = media::PixelFormat::kRgb24;
  options.threads = 1;  // the loader parallelises over samples
  if (record.payload_ext == "mp4") options = media::OwnClipOptions();  // a clip ingest wrote
  REEL_ASSIGN_OR_RETURN(auto decoder, media::VideoDecoder::Open(
                                          media::Input::View(record.payload, record.key), options));
  stack.w = decoder->output_width();
  stack.h = decoder->output_height();
  // The decoder counted the frames when it opened: one allocation, no regrowth and copying.
  stack.pixels.reserve(static_cast<size_t>(std::max<int64_t>(0, decoder->info().frame_count)) *
                       static_cast<size_t>(stack.w) * static_cast<size_t>(stack.h) * 3);
  REEL_RETURN_IF_ERROR(decoder->ForEachFrame([&](media::Frame&& frame) {
    stack.pixels.append(reinterpret_cast<const char*>(frame.data.data()), frame.data.size());
    ++stack.t;
    return Status::Ok();
  }));
  if (stack.t == 0) return DataLossError("record '" + record.key + "' holds no frames");
  return stack;
}

// The label each label becomes under `pairs` (the identity for classes in none).
Result<std::vector<int>> LabelSwaps(const std::vector<std::string>& classes,
                                    const std::vector<std::pair<std::string, std::string>>& pairs,
                                    const std::string& what) {
  std::vector<int> to(classes.size());
  for (size_t i = 0; i < to.size(); ++i) to[i] = static_cast<int>(i);
  std::vector<bool> paired(classes.size(), false);
  auto index_of = [&](const std::string& name) -> Result<size_t> {
    auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end()) {
      return InvalidArgumentError(what + ": the dataset has no class '" + name + "'");
    }
    const auto i = static_cast<size_t>(it - classes.begin());
    if (paired[i]) return InvalidArgumentError(what + ": class '" + name + "' is in two pairs");
    paired[i] = true;
    return i;
  };
  for (const auto& [a, b] : pairs) {
    if (a == b) return InvalidArgumentError(what + ": class '" + a + "' paired with itself");
    REEL_ASSIGN_OR_RETURN(size_t i, index_of(a));
    REEL_ASSIGN_OR_RETURN(size_t j, index_of(b));
    std::swap(to[i], to[j]);
  }
  return to;
}

}  // namespace

struct Loader::Impl {
  Impl(storage::ObjectStore& s, LoaderOptions opts)
      : store(s),
        o(std::move(opts)),
        pool(static_cast<size_t>(o.threads)),
        samples(
            &pool, static_cast<size_t>(o.prefetch_batches) * static_cast<size_t>(o.batch_size),
            [this](size_t position) { return Make(position); },
            [this](size_t position) { BeforeSubmit(position); }) {}

  Result<const dataset::ShardReader*> Reader(uint32_t shard) {
    std::lock_guard lock(readers_mu);
    auto& reader = readers[shard];
    if (!reader) {
      REEL_ASSIGN_OR_RETURN(reader, dataset::ShardReader::Open(store, o.root, o.split, shard));
    }
    return static_cast<const dataset::ShardReader*>(reader.get());
  }

  // A shard's tar must exist and be the size the manifest recorded: a shorter one was truncated (a
  // copy cut short, a full disk), and every record past the cut would fail one by one.
  Status CheckTar(uint32_t shard, uint64_t expected_bytes) {
    const std::string key = dataset::ShardTarKey(o.root, o.split, shard);
    const std::string uri = storage::ObjectUri(store, key);
    auto head = store.Head(key);
    if (!head.ok()) {
      if (head.status().code() == StatusCode::kNotFound) {
        return NotFoundError(uri + ": shard missing, though the manifest lists it");
      }
      return head.status().WithContext(uri);
    }
    if (head->size != expected_bytes) {
      return DataLossError(uri + " is " + std::to_string(head->size) +
                           " bytes, the manifest says " + std::to_string(expected_bytes) +
                           ": the shard is truncated or was replaced; ingest the dataset again");
    }
    return Status::Ok();
  }

  // Runs on a worker: read, decode, sample and transform plan entry `position`.
  Sample Make(uint64_t position) {
    Sample sample;
    const SampleRef& ref = plan[position];
    sample.label = ref.label;
    auto reader = Reader(ref.shard);
    if (!reader.ok()) {
      sample.status = reader.status();
      sample.fatal = true;
      return sample;
    }
    auto record = (*reader)->ReadRecord(ref.record);
    if (!record.ok()) {
      sample.status = record.status();
      return sample;
    }
    sample.key = record->key;
    const Slot slot = SlotOf(position);
    if (feature_dim > 0) {
      sample.status = Embedding(*record, slot.f32);
      return sample;
    }
    auto stack = Frames(*record);
    if (!stack.ok()) {
      sample.status = stack.status().WithContext(o.split + "/" + dataset::ShardName(ref.shard) +
                                                 " " + record->key);
      return sample;
    }
    auto rng = Rng::Stream(o.plan.seed, kSampleStream, epoch,
                           (static_cast<uint64_t>(before.size()) << 56) +
                               (static_cast<uint64_t>(o.plan.rank) << 40) + position);
    auto starts = ClipStarts(stack->t, o.clip, rng);
    if (!starts.ok()) {
      sample.status = starts.status();
      return sample;
    }
    const Flips flips = DrawFlips(o.transform, rng);
    if (flips.mirror) sample.label = mirrored_label[static_cast<size_t>(sample.label)];
    if (flips.reverse) sample.label = reversed_label[static_cast<size_t>(sample.label)];
    const int64_t clip_values = ClipValues(o.clip, o.transform);
    for (size_t k = 0; k < starts->size(); ++k) {
      const int64_t at = static_cast<int64_t>(k) * clip_values;
      sample.status =
          MakeClipInto(*stack, (*starts)[k], o.clip, o.transform, flips, rng,
                       slot.f32 ? slot.f32 + at : nullptr, slot.u8 ? slot.u8 + at : nullptr);
      if (!sample.status.ok()) return sample;
    }
    return sample;
  }

  // On the consumer's thread, before plan entry `position` is queued: the batch it belongs to
  // exists for its worker to write into, and the shards after it are on their way.
  void BeforeSubmit(size_t position) {
    const uint64_t index = position / static_cast<uint64_t>(o.batch_size);
    {
      std::lock_guard lock(filling_mu);
      std::unique_ptr<Batch>& batch = filling[index];
      if (!batch) batch = NewBatch();
    }
    PrefetchShardsAfter(plan[position].shard);
  }

  std::unique_ptr<Batch> NewBatch() const {
    auto batch = std::make_unique<Batch>();
    const auto values = static_cast<size_t>(sample_values) * static_cast<size_t>(o.batch_size);
    if (feature_dim > 0 || o.transform.normalize)
      batch->f32.resize(values);
    else
      batch->u8.resize(values);
    return batch;
  }

  Slot SlotOf(uint64_t position) {
    const auto b = static_cast<uint64_t>(o.batch_size);
    const size_t offset = position % b * static_cast<uint64_t>(sample_values);
    std::lock_guard lock(filling_mu);
    Batch& batch = *filling.at(position / b);
    return {batch.f32.empty() ? nullptr : batch.f32.data() + offset,
            batch.u8.empty() ? nullptr : batch.u8.data() + offset};
  }

  // The filled batch `index`, no longer the workers'.
  Batch TakeBatch(uint64_t index) {
    std::lock_guard lock(filling_mu);
    auto it = filling.find(index);
    REEL_CHECK(it != filling.end()) << "batch " << index << " was never started";
    Batch batch = std::move(*it->second);
    filling.erase(it);
    return batch;
  }

  // A features dataset's record: its stored embedding, as it is (no sampling or transforms).
  Status Embedding(const dataset::Record& record, float* out) const {
    const size_t bytes = static_cast<size_t>(feature_dim) * sizeof(float);
    if (record.payload_ext != "f32" || record.payload.size() != bytes) {
      return DataLossError("record '" + record.key + "' holds " +
                           std::to_string(record.payload.size()) + " bytes of ." +
                           record.payload_ext + ", not the " + std::to_string(bytes) +
                           " bytes of a " + std::to_string(feature_dim) + "-value embedding");
    }
    std::memcpy(out, record.payload.data(), bytes);  // little-endian, as x86 and arm64
    return Status::Ok();
  }

  // Shards in the order the plan first reaches them, for prefetching.
  void IndexShardSequence() {
    shard_sequence.clear();
    shard_ordinal.clear();
    for (const SampleRef& ref : plan) {
      if (shard_ordinal.emplace(ref.shard, shard_sequence.size()).second)
        shard_sequence.push_back(ref.shard);
    }
    prefetched_upto = 0;
  }

  // Asks the cache for the shards up to `prefetch_shards` past `shard` in plan order.
  void PrefetchShardsAfter(uint32_t shard) {
    if (cache == nullptr) return;
    size_t until = std::min(shard_sequence.size(),
                            shard_ordinal[shard] + 1 + static_cast<size_t>(o.prefetch_shards));
    for (; prefetched_upto < until; ++prefetched_upto) {
      std::string key = dataset::ShardTarKey(o.root, o.split, shard_sequence[prefetched_upto]);
      prefetcher->Submit([this, key] {
        Status status = cache->Prefetch(key);
        if (!status.ok())
          Logger("loader")->debug("prefetch of {} failed: {}", key, status.ToString());
      });
    }
  }

  void Drain() {
    samples.Stop();
    std::lock_guard lock(filling_mu);
    filling.clear();
  }

  storage::ObjectStore& store;
  LoaderOptions o;
  std::vector<std::string> classes;
  std::vector<int> mirrored_label, reversed_label;  // by label: flip_pairs, reverse_pairs
  SplitCatalog catalog;
  std::mutex readers_mu;
  std::map<uint32_t, std::unique_ptr<dataset::ShardReader>> readers;
  std::vector<SampleRef> plan;
  int64_t epoch = 0;
  std::vector<PlanSegment> before;  // this epoch's segments at other world sizes (elastic jobs)
  bool warned_segregation = false;  // logged once per loader
  LoaderStats stats;
  int64_t feature_dim = 0;                // a features dataset's embedding width; 0 for clips
  int64_t sample_values = 0;              // values one sample writes into its batch
  storage::ObjectStore* cache = nullptr;  // the store, when it prefetches (a cache)
  std::vector<uint32_t> shard_sequence;
  std::map<uint32_t, size_t> shard_ordinal;
  size_t prefetched_upto = 0;
  std::mutex filling_mu;
  std::map<uint64_t, std::unique_ptr<Batch>> filling;  // by batch index, while workers write it
  // Last: destroyed first, so no worker outlives the state above.
  std::unique_ptr<ThreadPool> prefetcher;
  ThreadPool pool;
  OrderedMap<Sample> samples;  // plan positions to samples, in plan order
};

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() {
  if (impl_) impl_->Drain();
}

Result<std::unique_ptr<Loader>> Loader::Open(storage::ObjectStore& store, LoaderOptions options) {
  if (options.batch_size < 1) return InvalidArgumentError("batch_size must be at least 1");
  if (options.threads < 1) return InvalidArgumentError("threads must be at least 1");
  if (options.prefetch_batches < 1)
    return InvalidArgumentError("prefetch_batches must be at least 1");
  if (options.prefetch_shards < 0)
    return InvalidArgumentError("prefetch_shards must not be negative");
  options.plan.batch_size = options.batch_size;
  REEL_ASSIGN_OR_RETURN(dataset::Manifest manifest, dataset::Manifest::Read(store, options.root));
  if (!manifest.splits.count(options.split)) {
    return NotFoundError("dataset " + manifest.name + " has no split '" + options.split + "'");
  }
  auto impl = std::make_unique<Impl>(store, std::move(options));
  impl->classes = manifest.classes;
  impl->feature_dim = manifest.mode == dataset::DatasetMode::kFeatures ? manifest.feature_dim() : 0;
  if (impl->feature_dim > 0) {
    // Embeddings are read as stored: one per record, no flips to relabel.
    impl->o.clip.clips_per_video = 1;
    impl->o.flip_pairs.clear();
    impl->o.reverse_pairs.clear();
  }
  impl->sample_values = impl->feature_dim > 0 ? impl->feature_dim
                                              : impl->o.clip.clips_per_video *
                                                    ClipValues(impl->o.clip, impl->o.transform);
  REEL_ASSIGN_OR_RETURN(impl->mirrored_label,
                        LabelSwaps(impl->classes, impl->o.flip_pairs, "flip_pairs"));
  REEL_ASSIGN_OR_RETURN(impl->reversed_label,
                        LabelSwaps(impl->classes, impl->o.reverse_pairs, "reverse_pairs"));
  // Every shard the manifest lists is there, whole, before the first batch (one HEAD each).
  for (const auto& shard : manifest.splits.at(impl->o.split).shards) {
    std::optional<uint32_t> number = dataset::ParseShardName(shard.name);
    if (!number) {
      return DataLossError("manifest of " + store.uri() + ": bad shard name " + shard.name);
    }
    REEL_RETURN_IF_ERROR(impl->CheckTar(*number, shard.tar_bytes));
  }
  impl->cache = store.SupportsPrefetch() ? &store : nullptr;
  if (impl->cache != nullptr && impl->o.prefetch_shards > 0) {
    impl->prefetcher = std::make_unique<ThreadPool>(1);
  } else {
    impl->cache = nullptr;
  }
  REEL_ASSIGN_OR_RETURN(impl->catalog,
                        SplitCatalog::FromIndexes(store, impl->o.root, impl->o.split));
  REEL_RETURN_IF_ERROR(ValidatePlanOptions(impl->catalog, impl->o.plan));
  auto loader = std::unique_ptr<Loader>(new Loader(std::move(impl)));
  REEL_RETURN_IF_ERROR(loader->Start(LoaderState{loader->impl_->o.plan.seed, 0, 0}));
  return loader;
}

Status Loader::Start(const LoaderState& state) {
  Impl& m = *impl_;
  if (state.seed != m.o.plan.seed) {
    return InvalidArgumentError("loader state has seed " + std::to_string(state.seed) +
                                " but the loader was opened with seed " +
                                std::to_string(m.o.plan.seed));
  }
  if (state.position % static_cast<uint64_t>(m.o.batch_size) != 0) {
    return InvalidArgumentError("loader state position " + std::to_string(state.position) +
                                " is not at a batch boundary");
  }
  m.Drain();
  PlanOptions plan = m.o.plan;
  plan.epoch = state.epoch;
  plan.before = state.before;
  uint64_t position = state.position;
  const bool resized = state.world_size > 0 && state.world_size != plan.world_size;
  if (resized && position > 0) {
    // The job was resized: what the old world read of this epoch becomes an earlier segment.
    plan.before.push_back({state.world_size, position});
    position = 0;
  }
  REEL_ASSIGN_OR_RETURN(m.plan, PlanEpoch(m.catalog, plan));
  if (position > m.plan.size()) {
    return InvalidArgumentError("loader state position " + std::to_string(position) +
                                " is past the epoch's " + std::to_string(m.plan.size()) +
                                " samples");
  }
  if (resized && plan.rank == 0) {
    Logger("loader")->info(
        "epoch {} continues at world size {} (it was {}): {} samples per rank in the rest of it",
        state.epoch, plan.world_size, state.world_size, m.plan.size());
  }
  m.epoch = state.epoch;
  m.before = plan.before;
  if (plan.world_size > 1 && !m.warned_segregation) {
    // A rank whose share of the epoch misses classes trains batch norm on a biased subset:
    // the shards are sorted by class (an ingest that did not shuffle) and too few to mix.
    std::set<int> all, mine;
    for (const auto& shard : m.catalog.labels) all.insert(shard.begin(), shard.end());
    for (const auto& sample : m.plan) mine.insert(sample.label);
    if (mine.size() < all.size()) {
      m.warned_segregation = true;
      Logger("loader")->warn(
          "rank {} reads {} of the {} classes of split '{}' in epoch {}: its shards hold records "
          "sorted by class, and "
          "each rank reads a contiguous part of them; re-ingest with a shuffled order (reel ingest "
          "shuffles unless "
          "--no-shuffle) or use more, smaller shards",
          plan.rank, mine.size(), all.size(), m.o.split, state.epoch);
    }
  }
  m.IndexShardSequence();
  m.samples.Reset(position, m.plan.size());
  return Status::Ok();
}

Result<std::optional<Batch>> Loader::Next() {
  Impl& m = *impl_;
  if (!m.samples.HasNext()) return std::optional<Batch>();
  const int b = m.o.batch_size;
  std::vector<Sample> samples;
  samples.reserve(static_cast<size_t>(b));
  double waited = 0;
  m.samples.WaitAhead(static_cast<size_t>(b), &waited);
  for (int i = 0; i < b; ++i) samples.push_back(m.samples.Next(&waited));
  const uint64_t index = m.samples.next_index() / static_cast<uint64_t>(b) - 1;
  Batch batch = m.TakeBatch(index);

  // A missing or truncated shard fails the epoch; an unreadable record is reported and replaced
  // by a readable one of the same batch.
  for (const Sample& s : samples) {
    if (s.fatal) return s.status;
  }
  const Sample* good = nullptr;
  for (const Sample& s : samples) {
    if (s.status.ok()) {
      good = &s;
      break;
    }
  }
  if (good == nullptr) {
    return DataLossError("every sample of batch " + std::to_string(index) +
                         " is unreadable; first: " + samples[0].status.ToString());
  }
  batch.index = index;
  const int clips = m.o.clip.clips_per_video;
  const int n = m.o.transform.size;
  batch.shape = {static_cast<int64_t>(b) * clips, 3, m.o.clip.frames, n, n};
  if (m.feature_dim > 0) batch.shape = {b, m.feature_dim, 1, 1, 1};
  const auto values = static_cast<size_t>(m.sample_values);
  const size_t good_at = static_cast<size_t>(good - samples.data()) * values;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample* use = &samples[i];
    if (!use->status.ok()) {
      ++m.stats.corrupt_records;
      Logger("loader")->warn("skipping a record: {}", use->status.ToString());
      use = good;
      if (!batch.f32.empty())
        std::memcpy(batch.f32.data() + i * values, batch.f32.data() + good_at,
                    values * sizeof(float));
      if (!batch.u8.empty())
        std::memcpy(batch.u8.data() + i * values, batch.u8.data() + good_at, values);
    }
    for (int c = 0; c < clips; ++c) {
      batch.labels.push_back(use->label);
      batch.keys.push_back(use->key);
    }
  }
  batch.input_wait_s = waited;
  ++m.stats.batches;
  m.stats.samples += static_cast<uint64_t>(b);
  m.stats.input_wait_s += waited;
  return std::optional<Batch>(std::move(batch));
}

LoaderState Loader::state() const {
  return LoaderState{impl_->o.plan.seed, impl_->epoch, impl_->samples.next_index(),
                     impl_->o.plan.world_size, impl_->before};
}

uint64_t Loader::batches_per_epoch() const {
  return impl_->plan.size() / static_cast<uint64_t>(impl_->o.batch_size);
}

const std::vector<std::string>& Loader::class_names() const { return impl_->classes; }

LoaderStats Loader::stats() const { return impl_->stats; }

}  // namespace reel::loader
