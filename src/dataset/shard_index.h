// The index of one shard, "<root>/<split>/shard-NNNNNN.idx": where every record's members lie
// inside the shard's .tar, so that a reader fetches one record with one ranged GET, and their
// checksums. It is written after the .tar it describes; a .tar without an .idx is an unfinished
// shard and is ignored.
//
// Encoding: one compact UTF-8 JSON object (readable with `json.load` in Python):
//   {"format": "reel-shard-index", "version": 1, "split": "train", "shard": "shard-000000",
//    "tar_bytes": 1049600,
//    "records": [
//      {"key": "v_ApplyEyeMakeup_g01_c01-0000", "label": 0,
//       "members": [["v_ApplyEyeMakeup_g01_c01-0000.mp4", 512, 104233, "9f0c1e2d3b4a5968"],
//                   ["v_ApplyEyeMakeup_g01_c01-0000.cls", 105472, 1, "..."],
//                   ["v_ApplyEyeMakeup_g01_c01-0000.json", 106496, 230, "..."]]},
//      ...]}
// Each member is [tar member name, offset of its data in the .tar, size in bytes, XXH3-64 of the
// data as 16 lower-case hex digits]. Records appear in tar order; a record's members are
// consecutive in the tar, so [members.front().offset, members.back().offset + size) covers them.
//
// Parse validates everything a reader relies on: DataLoss for malformed JSON (with the parser's
// message), missing or mistyped fields, invalid keys, member names that do not start with
// "<key>.", data offsets that are not 512-aligned, that overlap, go backwards or pass tar_bytes,
// and duplicate keys; FailedPrecondition for a version newer than kShardIndexVersion.
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::dataset {

inline constexpr int kShardIndexVersion = 1;
inline constexpr std::string_view kShardIndexFormat = "reel-shard-index";

struct IndexMember {
  std::string name;     // "<key>.<ext>"
  uint64_t offset = 0;  // of the data inside the .tar
  uint64_t size = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the data
};

struct IndexRecord {
  std::string key;
  int label = -1;
  std::vector<IndexMember> members;  // in tar order, never empty in a parsed index

  uint64_t begin() const { return members.empty() ? 0 : members.front().offset; }
  uint64_t end() const { return members.empty() ? 0 : members.back().offset + members.back().size; }
  // The member named "<key>.<ext>", or null.
  const IndexMember* Find(std::string_view ext) const;
};

struct ShardIndex {
  int version = kShardIndexVersion;
  std::string split;
  uint32_t shard = 0;      // the number in the shard's name
  uint64_t tar_bytes = 0;  // the .tar's size
  std::vector<IndexRecord> records;

  // Records per class index ([label] -> count), sized to the largest label + 1.
  std::vector<uint64_t> ClassCounts() const;

  // The JSON text above. Errors: InvalidArgument when a field cannot be encoded (non-UTF-8).
  Result<std::string> Serialize() const;
  // `what` names the index in error messages (its URI).
  static Result<ShardIndex> Parse(std::string_view text, std::string_view what);
};

// 16 lower-case hex digits.
std::string Xxh3Hex(uint64_t value);

}  // namespace reel::dataset
