// `reel ingest`: raw videos from any store -> a sharded Reel dataset on any store.
//
// The run lists the sources (sources.h), plans and makes each video's clips on a pool of
// workers (clip_maker.h, one decoder and encoder per worker, at most 2 x workers videos in
// memory), and appends the records in a fixed order to one ShardWriter per split, so the dataset
// is the same whatever the worker count. That order is the listing's shuffled by `shuffle_seed`
// (sources list videos class by class): shards then mix classes, as WebDataset advises, so that
// readers which split a split's stream of shards between ranks give every rank every class.
// manifest.json is written last; ingest_report.json beside it lists every video that was skipped
// and why.
//
// Bad input never stops the run: corrupt, truncated, empty, audio-only or unsupported files and
// listing rows that name missing files are reported and skipped.
//
// Resuming: after every published shard the run checkpoints, in <output>/_ingest/state.json,
// how many shards of each split are finished and which (video, clip) comes next. Started again
// with the same sources and settings, it keeps those shards, skips the videos and clips they
// hold, and rewrites only the unfinished shard: no clip is written twice, and readers only ever
// see whole shards (the store publishes each atomically; the manifest names the finished ones).
//
// Errors: InvalidArgument (bad options or URIs), NotFound (no sources), AlreadyExists (a
// complete dataset from other sources or settings is at the output; `overwrite` replaces it),
// FailedPrecondition (an unfinished run with other sources or settings is at the output;
// `restart` discards it), and store errors that persist after the store's retries.
// Thread-safety: RunIngest may be called from any thread; it owns its workers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "ingest/clip_maker.h"
#include "ingest/clip_plan.h"
#include "ingest/sources.h"

namespace reel::ingest {

struct IngestOptions {
  std::string source;  // URI of a UCF101 folder, a Kinetics CSV or a CSV/JSONL manifest
  std::string output;  // URI of the dataset root
  std::string name;    // dataset name; "" = the output's last path segment
  ClipSettings clip;
  EncodeSettings encode;
  uint64_t shard_bytes = 128ull << 20;
  int workers = 0;         // 0 = one per core
  bool overwrite = false;  // replace a complete dataset made from other sources or settings
  bool restart = false;    // discard an unfinished run made with other sources or settings
  bool progress = true;    // progress bar on a terminal
  bool shuffle = true;     // false: the listing's order (class by class)
  uint64_t shuffle_seed = 0;
  // When set, the dataset is written here instead of opening `output` (embedding, tests);
  // not owned, must outlive the call.
  storage::ObjectStore* output_store = nullptr;
};

struct FailedVideo {
  std::string key;
  std::string reason;
};

struct IngestReport {
  std::string output;
  int64_t videos_listed = 0;
  int64_t videos_ingested = 0;           // in this run
  int64_t videos_resumed = 0;            // finished by an earlier, interrupted run
  std::vector<FailedVideo> failed;       // skipped with the reason (decode errors, empty, ...)
  std::vector<MissingVideo> missing;     // named by the listing but not found
  std::map<std::string, int64_t> clips;  // per split, in the finished dataset
  int64_t clips_written = 0;             // by this run
  uint64_t bytes_written = 0;            // shard bytes written by this run
  double seconds = 0;
  bool already_complete = false;  // the dataset was there already; nothing was done
  // Where this run's time went, in thread-seconds summed over the workers (clip_maker.h), and
  // write_s: packing records into shard tars and writing them (the committing thread).
  StageTimes stages;
  double write_s = 0;

  std::string ToJson() const;
};

Result<IngestReport> RunIngest(const IngestOptions& options);

}  // namespace reel::ingest
