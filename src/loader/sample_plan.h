// Which samples each rank reads, in which order, in one epoch: the part of the loader that makes
// distributed training exact and repeatable. Pure computation over a split's catalog (shard
// sizes and labels from the shard indexes); no I/O besides CatalogFromIndexes.
//
// Default (exactly once): the split's shards are put in an order shuffled by (seed, epoch); their
// records, each shard in its own order, form one stream; rank r takes the r-th contiguous part
// of that stream, so each rank reads few shards, mostly whole, with ranged reads at the edges;
// a shuffle buffer then permutes each rank's part (WebDataset's scheme), seeded by
// (seed, epoch, rank). Every rank gets the same number of samples, a multiple of the batch size:
//   Remainder::kPad   the stream is extended by wrapping around to its start, so every sample
//                     is read at least once and at most the pad count more (DistributedSampler)
//   Remainder::kDrop  the stream's tail is dropped (a different tail each epoch)
// Class-balanced (optional): the epoch draws as many samples as the split holds, with
// replacement, each with probability inversely proportional to its class's frequency; the draws
// are then laid out in stream order, split across ranks and shuffled as above.
//
// The plan depends only on (catalog, options): not on thread counts or timing. A rank resumes
// mid-epoch by skipping the first `position` entries of its plan (LoaderState).
//
// Elastic jobs: an epoch may be read in segments at different world sizes (a job shrunk or grown
// by its scheduler). Each earlier segment (`PlanOptions::before`) says how many samples each of
// its ranks took; the samples they left, in order (rank by rank, each rank's untaken entries in
// its plan order), are the next segment's stream, split and shuffled as above (the buffer seeded
// by the segment's number too). So every sample is read once in the epoch however often it is
// resized, provided what is left splits into whole batches on the new ranks; when it does not,
// the remainder rule applies to it as at an epoch's end (kPad repeats, kDrop skips fewer than
// world_size x batch_size samples), since ranks must take equal whole batches.
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/object_store.h"

namespace reel::loader {

// One sample: a record of a shard of the split.
struct SampleRef {
  uint32_t shard = 0;   // shard number (as in "shard-000007")
  uint32_t record = 0;  // record index within the shard's index
  int label = -1;

  friend bool operator==(const SampleRef& a, const SampleRef& b) {
    return a.shard == b.shard && a.record == b.record;
  }
  friend bool operator<(const SampleRef& a, const SampleRef& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.record < b.record;
  }
};

// The records of one split: per shard (ascending numbers) the labels of its records.
struct SplitCatalog {
  std::vector<uint32_t> shards;
  std::vector<std::vector<int>> labels;  // labels[i][j]: label of record j of shards[i]

  uint64_t size() const;
  // Reads every shard index of the split (one GET each). Errors: the dataset reader's.
  static Result<SplitCatalog> FromIndexes(storage::ObjectStore& store, const std::string& root,
                                          const std::string& split);
};

enum class Remainder { kPad, kDrop };

// An earlier segment of an epoch: each of its `world_size` ranks took the first `position`
// samples of its plan.
struct PlanSegment {
  int world_size = 1;
  uint64_t position = 0;

  friend bool operator==(const PlanSegment& a, const PlanSegment& b) {
    return a.world_size == b.world_size && a.position == b.position;
  }
};

struct PlanOptions {
  int world_size = 1;
  int rank = 0;
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool shuffle = true;           // shard order and the shuffle buffer; off: stream order
  size_t shuffle_buffer = 1000;  // records held by the buffer; 1 = no buffer shuffling
  int batch_size = 1;            // every rank gets a multiple of this many samples
  Remainder remainder = Remainder::kPad;
  bool class_balanced = false;
  std::vector<PlanSegment> before;  // this epoch's earlier segments, in order (elastic jobs)
};

// InvalidArgument for a rank outside [0, world_size), non-positive sizes, an empty catalog, or an
// earlier segment that took more than its plan held.
Status ValidatePlanOptions(const SplitCatalog& catalog, const PlanOptions& options);

// Samples per rank per epoch (the same on every rank). After earlier segments the rest of the
// epoch may hold fewer than one batch per rank: with kPad it is padded to one, with kDrop it is
// 0 (the epoch is over).
Result<uint64_t> SamplesPerRank(const SplitCatalog& catalog, const PlanOptions& options);

// The samples `options.rank` reads in `options.epoch`, in order.
Result<std::vector<SampleRef>> PlanEpoch(const SplitCatalog& catalog, const PlanOptions& options);

// What a checkpoint saves so that the loader restarts where it stopped, at the same world size
// or another one.
struct LoaderState {
  LoaderState() = default;
  LoaderState(uint64_t seed, int64_t epoch, uint64_t position, int world_size = 0,
              std::vector<PlanSegment> before = {})
      : seed(seed),
        epoch(epoch),
        position(position),
        world_size(world_size),
        before(std::move(before)) {}

  uint64_t seed = 0;
  int64_t epoch = 0;
  uint64_t position = 0;  // samples of the current segment's plan already delivered
  int world_size = 0;     // of the current segment; 0 (states before elastic jobs): the loader's
  std::vector<PlanSegment> before;  // this epoch's earlier segments

  std::string ToJson() const;
  // Errors: DataLoss for malformed JSON or missing fields.
  static Result<LoaderState> FromJson(const std::string& text);
};

}  // namespace reel::loader
