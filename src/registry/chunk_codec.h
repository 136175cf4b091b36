// How the registry stores one chunk of a tensor's bytes, losslessly: the part of "weights stored
// once, changes stored small" that makes a changed tensor small (docs/architecture.md: registry).
//
// A chunk is a run of whole elements of one tensor. It is stored alone ("full"), or as a delta
// against a base chunk of the same size: the chunk at the same place in the same tensor of the
// parent version. Either way the bytes are regrouped by significance and then zstd-compressed:
//   full:  zstd(planes(raw))          delta: zstd(planes(raw XOR base))
// planes(): for elements of w bytes, every element's byte 0, then every byte 1, and so on. A
// fine-tune moves each weight a little, so after XOR the sign, exponent and high mantissa bits
// are nearly all zero, and grouped together those planes compress to almost nothing; the low
// mantissa planes stay noise either way.
//
// Encoded layout (little-endian): "RKC1", u8 form (0 full, 1 delta, 2 stored), u8 element width,
// u16 chain depth (0 for a full chunk, the base's depth + 1 for a delta: how many chunks a read
// decodes after this one), u64 raw size, then for a delta the 32-byte SHA-256 of the base
// chunk's raw bytes, then one zstd frame (with its checksum) of raw-size bytes; a stored chunk
// has the raw bytes themselves instead of the frame.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace reel::registry {

// kStored: the raw bytes as they are, for a store whose owner turned compression off (the
// address still checks every read).
enum class ChunkForm : uint8_t { kFull = 0, kDelta = 1, kStored = 2 };

struct ChunkHeader {
  ChunkForm form = ChunkForm::kFull;
  int element_width = 1;    // 1, 2, 4 or 8 bytes
  int depth = 0;            // 0 for a full chunk; a delta's base's depth + 1
  uint64_t raw_size = 0;    // a multiple of element_width
  std::string base_sha256;  // delta only: 64 hex digits of the base chunk's raw bytes
};

// The base of a delta: its raw bytes, its own chain depth, and its address (64 hex digits) when
// the caller knows it (else EncodeChunk hashes `raw`).
struct DeltaBase {
  std::string_view raw;
  int depth = 0;
  std::string_view sha256;
};
inline constexpr int kMaxChunkDepth = 65535;
// The longest header (a delta's): a read of this many bytes is enough for ReadChunkHeader.
inline constexpr size_t kMaxChunkHeaderBytes = 48;

struct ChunkEncodeOptions {
  int zstd_level = 1;
  bool compress = true;  // false: kStored, and no delta
};

// Encodes `raw` (whole elements of `element_width` bytes) alone when `base` is null, else as a
// delta against it, which must have the same size; stored as it is when options.compress is
// off. Errors: InvalidArgument for a width other than 1, 2, 4 or 8, a size that is not whole
// elements, a base of another size, a base already kMaxChunkDepth deep, or a base without
// compression.
Result<std::string> EncodeChunk(std::string_view raw, int element_width, const DeltaBase* base,
                                const ChunkEncodeOptions& options = {});

// The header of an encoded chunk. Errors: DataLoss (naming `what`) for a bad magic, form, width
// or size; FailedPrecondition for a format version this build does not know.
Result<ChunkHeader> ReadChunkHeader(std::string_view encoded, std::string_view what);

// The raw bytes. For a delta, `base` is the base chunk's raw bytes (the caller fetched them by
// header.base_sha256 and checked them); for a full chunk it must be empty. Errors: DataLoss
// (naming `what`) for a damaged chunk; InvalidArgument for a base of the wrong size or a base
// given to a full chunk. The caller checks the result's SHA-256 against the chunk's address.
Result<std::string> DecodeChunk(std::string_view encoded, std::string_view base,
                                std::string_view what);

// The raw bytes of the last chunk of `chain`: a full chunk, then deltas each taken against the
// chunk before it (oldest first), as a read fetched them by their base addresses. Decoded at
// once: regrouping by significance is a permutation, so it commutes with XOR and the planes of
// the last chunk are the XOR of every link's planes; the bytes are regrouped once, not once per
// link. Errors: InvalidArgument for an empty chain; DataLoss (naming `what`) for a damaged link,
// a chain that does not start full, or links of different sizes or widths. Intermediate links
// are not checked against their addresses: the caller checks the result's SHA-256 against the
// last chunk's address, and decodes link by link with DecodeChunk to name a damaged one.
Result<std::string> DecodeChain(const std::vector<std::string_view>& chain, std::string_view what);
// The same into out[0, size), where the caller wants the bytes (a tensor's buffer); DataLoss when
// the chain holds another size.
Status DecodeChainInto(const std::vector<std::string_view>& chain, std::string_view what, char* out,
                       size_t size);

}  // namespace reel::registry
