// Internal to ingest: what an unfinished ingest has committed, saved as `_ingest/state.json`
// after every published shard so that a rerun resumes without redoing or duplicating clips.
//   {"version": 1, "source_hash": "...", "settings": {...},
//    "splits": {"train": {"shards": 3, "next_video": 120, "next_clip": 2}, ...},
//    "failed": [{"index": 7, "key": "file:///raw/a.avi", "reason": "..."}, ...]}
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ingest/pipeline.h"

namespace reel::ingest::internal {

// Where a split's committed records end: every clip before (video, clip) is in a finished shard.
struct Position {
  int64_t video = 0;  // index into the listing
  int clip = 0;
};

struct SplitState {
  uint32_t shards = 0;  // finished shards 0..shards-1
  Position next;
};

struct RunState {
  std::string source_hash;
  nlohmann::json settings;
  std::map<std::string, SplitState> splits;
  std::vector<std::pair<int64_t, FailedVideo>> failed;  // by listing index

  std::string ToJson() const;
  // Errors: DataLoss naming `where` and the key that is missing or mistyped.
  static Result<RunState> FromJson(const std::string& text, const std::string& where);
};

}  // namespace reel::ingest::internal
