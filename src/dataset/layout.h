// Where a Reel dataset's objects live on a store and which names are allowed. Every other header
// of this part builds its keys with these functions, so the layout is defined in one place:
//
//   <root>/manifest.json                  written last; its presence means "the dataset is
//   complete" <root>/<split>/shard-000000.tar       WebDataset-style tar shard (see shard_writer.h)
//   <root>/<split>/shard-000000.idx       its index (see shard_index.h); written after the .tar
//
// `root` is a key prefix inside the store without leading or trailing '/' ("" = the store's
// root, "datasets/ucf101"); trailing slashes are ignored. Shard numbers are printed with at least
// six digits ("shard-000123", "shard-1234567").
//
// Sample keys (the WebDataset "__key__" shared by a sample's members) are 1..kMaxSampleKeyBytes
// bytes of [A-Za-z0-9_+=@,-]. No '.' (WebDataset splits a member name at the first dot of its
// base name into key and extension) and no '/', so a member name ("<key>.frames.zst") always
// fits the 100-byte ustar name field and every tar reader agrees on it.
//
// Thread-safety: free functions, reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "storage/object_store.h"

namespace reel::dataset {

inline constexpr size_t kMaxSampleKeyBytes = 80;
inline constexpr std::string_view kManifestFileName = "manifest.json";

// What a sample's payload member holds.
//   kVideo:  "<key>.mp4", an H.264 clip in an MP4 container
//   kFrames: "<key>.frames.zst", uint8 frames as frames_codec.h encodes them
//   kFeatures: "<key>.f32", one embedding: little-endian float32 values, as many as the
//            manifest's features.dim (`reel features`, serve/features.h)
enum class DatasetMode { kVideo, kFrames, kFeatures };

std::string_view DatasetModeName(DatasetMode mode);           // "video" | "frames" | "features"
Result<DatasetMode> ParseDatasetMode(std::string_view name);  // InvalidArgument otherwise
std::string_view PayloadExtension(DatasetMode mode);          // "mp4" | "frames.zst" | "f32"
// The mode whose payload extension is `ext`; InvalidArgument for any other extension.
Result<DatasetMode> ModeOfExtension(std::string_view ext);

// InvalidArgument (naming the key and the rule it breaks) unless `key` is a valid sample key.
Status ValidateSampleKey(std::string_view key);
// A valid sample key derived from any string: disallowed bytes become '_', an empty input
// becomes "_", and an input longer than kMaxSampleKeyBytes keeps its head and ends with '-' and
// 16 hex digits of its xxh3, so distinct long inputs stay distinct (barring hash collisions).
// Distinct inputs may still map to one key ("a b" and "a_b"): the shard writer refuses
// duplicates, so callers that sanitise must make keys unique themselves (e.g. add a counter).
std::string SanitizeSampleKey(std::string_view raw);

// Split names ("train", "val", "test") are 1..64 bytes of [A-Za-z0-9_-]. InvalidArgument otherwise.
Status ValidateSplitName(std::string_view split);

// `root` without trailing slashes; InvalidArgument when it starts with '/' or is not a valid key
// prefix (see storage/object_store.h).
Result<std::string> NormalizeRoot(std::string_view root);

// Keys inside a normalised root.
std::string DatasetKey(std::string_view root, std::string_view relative);  // "<root>/<relative>"
std::string ManifestKey(std::string_view root);
std::string SplitPrefix(std::string_view root, std::string_view split);  // "<root>/<split>/"
std::string ShardName(uint32_t number);                                  // "shard-000123"
std::string ShardTarKey(std::string_view root, std::string_view split, uint32_t number);
std::string ShardIndexKey(std::string_view root, std::string_view split, uint32_t number);
// The number in "shard-000123" (with or without ".tar"/".idx"); nullopt for anything else.
std::optional<uint32_t> ParseShardName(std::string_view name);

using storage::ObjectUri;  // "<store uri>/<key>" for error messages

}  // namespace reel::dataset
