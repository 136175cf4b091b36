// The training data loader: batches of clips from a Reel dataset on any ObjectStore, for one
// rank of a (possibly distributed) job.
//
// Each epoch follows sample_plan.h's plan for (seed, epoch, rank): every sample exactly once
// across ranks (or class-balanced), the same whole number of batches on every rank. Records are
// read with one ranged GET each through the store (put a CachingStore in front of S3 so a shard
// is fetched once; the loader then also fetches the next `prefetch_shards` shards of its plan in
// the background while the current ones are consumed), decoded (H.264 clips through media, or zstd
// frames), sampled in time and transformed (clip_transform.h) on a pool of `threads` workers, at
// most `prefetch_batches` batches ahead of the trainer: memory is bounded by the configuration, not
// the dataset. Results are assembled in plan order, so batches do not depend on the thread count.
//
// A record that fails to read or decode (checksum mismatch, corrupt payload) is logged with its
// shard and key, counted in stats(), and replaced in its batch by another sample of that batch,
// so batch shapes and counts stay equal across ranks.
//
// A features dataset (`reel features`) gives one stored embedding per record instead: the clip
// options and transforms do not apply, and its records keep their stored labels.
//
// Resuming: state() after a batch is (seed, epoch, samples delivered, world size); Start(state)
// continues so that the remaining batches of the epoch are exactly those an uninterrupted run
// would give. A state from another world size (an elastic job, resized) continues the epoch with
// what the old world's ranks had not read, split across the new world (sample_plan.h).
//
// Errors: Open: InvalidArgument (options), NotFound (no dataset or split), the store's.
// Next: Unavailable and other store errors that persist past the store's retries; DataLoss when
// every sample of a batch is unreadable.
// Thread-safety: one Loader belongs to one thread (the training loop); it owns its workers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "loader/clip_transform.h"
#include "loader/sample_plan.h"
#include "storage/object_store.h"

namespace reel::loader {

struct LoaderOptions {
  std::string root;  // dataset root within the store ("" = the store's root)
  std::string split = "train";
  int batch_size = 8;
  PlanOptions plan;  // world_size, rank, seed, shuffle, buffer, remainder, balance
                     // (its batch_size and epoch are set by the loader)
  ClipOptions clip;
  TransformOptions transform;
  // Classes that trade labels when a training sample is mirrored (transform.flip) or played
  // backwards (transform.reverse), by name, as mmaction2's flip_label_map: {MoveLeft, MoveRight}
  // under either. A class in no pair keeps its label. InvalidArgument at Open for a name the
  // dataset lacks or a class in two pairs.
  std::vector<std::pair<std::string, std::string>> flip_pairs, reverse_pairs;
  int threads = 2;           // decode and transform workers
  int prefetch_batches = 2;  // batches prepared ahead of the trainer
  // With a CachingStore: shards fetched into the cache ahead of the one being read.
  int prefetch_shards = 2;
};

struct Batch {
  // B x C x T x H x W, C = 3; `f32` when the transform normalises, else `u8`. From a features
  // dataset (serve/features.h): B x D x 1 x 1 x 1, one stored embedding per record in `f32`.
  std::array<int64_t, 5> shape = {0, 0, 0, 0, 0};
  UninitializedVector<float> f32;  // written whole by the workers: no zeroing first
  UninitializedVector<uint8_t> u8;
  std::vector<int> labels;        // per clip (B)
  std::vector<std::string> keys;  // per clip
  uint64_t index = 0;             // batch number within the epoch
  double input_wait_s = 0;        // time Next() waited for workers (0: the trainer was slower)
};

struct LoaderStats {
  uint64_t batches = 0;
  uint64_t samples = 0;
  uint64_t corrupt_records = 0;  // skipped and replaced
  double input_wait_s = 0;       // total of Batch::input_wait_s
};

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Open(storage::ObjectStore& store, LoaderOptions options);
  ~Loader();

  // Starts (or restarts) at `state`: its epoch, from sample `position` (a multiple of the batch
  // size) of its segment. InvalidArgument for a seed that differs from the options' or a bad
  // position.
  Status Start(const LoaderState& state);
  // The next batch of the epoch, or nullopt after the last one.
  Result<std::optional<Batch>> Next();

  LoaderState state() const;
  uint64_t batches_per_epoch() const;  // of the current epoch's plan (its segment, if resized)
  const std::vector<std::string>& class_names() const;
  LoaderStats stats() const;

  struct Impl;

 private:
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::loader
