// One sample of a Reel dataset, as the ingest hands it to ShardWriter and as ShardReader returns
// it. In a shard a record is three consecutive tar members sharing its key (WebDataset layout):
//
//   <key>.mp4 | <key>.frames.zst   the payload (see layout.h DatasetMode, frames_codec.h)
//   <key>.cls                      the class index as ASCII decimal, no newline ("17")
//   <key>.json                     the metadata object, compact UTF-8 JSON
//
// Metadata: the ingest fills what it knows about the clip; by convention
//   "source"       the source video (URI or path relative to the listing)
//   "start_frame", "end_frame"   clip bounds in source frames, end exclusive
//   "start_s", "end_s"           the same in seconds
//   "fps"          frames per second of the clip
// The shard writer adds (and refuses a caller value that disagrees with) these fields:
//   "key"          the sample key
//   "label"        the class name (Record::label_name)
//   "label_index"  the class index (Record::label)
//   "checksum"     "xxh3:" + 16 lower-case hex digits of the payload's XXH3-64
// Thread-safety: a plain value.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace reel::dataset {

struct Record {
  std::string key;          // see layout.h ValidateSampleKey
  int label = -1;           // class index, >= 0
  std::string label_name;   // the class name, non-empty
  std::string payload;      // the payload member's bytes
  std::string payload_ext;  // "mp4" or "frames.zst"
  nlohmann::json metadata = nlohmann::json::object();
};

// Metadata field names the shard writer owns.
inline constexpr const char* kMetaKey = "key";
inline constexpr const char* kMetaLabel = "label";
inline constexpr const char* kMetaLabelIndex = "label_index";
inline constexpr const char* kMetaChecksum = "checksum";

}  // namespace reel::dataset
