// How the registry stores one chunk of a tensor's bytes, losslessly: the part of "weights stored
// once, changes stored small" that makes a changed tensor small (docs/architecture.md: registry).
//
// A chunk is a run of whole elements of one tensor. It is stored alone ("full"), or as a delta
// against a base chunk of the same size: the chunk at the same place in the same tensor of the
// parent version. Either way the bytes are regrouped by significance and then zstd-compressed:
//   full:        zstd(planes(raw))
//   difference:  zstd(planes(zigzag(raw - base)))
//   linear:      zstd(planes(zigzag(raw - (2 base - before))))
// Elements are read as unsigned integers of their width (a float's bit pattern), and arithmetic
// wraps, so every form is exact. zigzag() maps a small signed difference to a small unsigned one
// (0, -1, 1, -2 -> 0, 1, 2, 3). planes(): for elements of w bytes, every element's byte 0, then
// every byte 1, and so on. A fine-tune moves each weight a little, so the difference's high bytes
// are nearly all zero, and grouped together those planes compress to almost nothing; the low
// planes stay noise either way. "before" is the base's own base: checkpoints of one run move
// their weights along much the same path from one to the next, so extrapolating the base's step
// leaves a smaller residual than the base alone (about 0.53 of a chunk against 0.57 for
// R(2+1)D-18 under AdamW); the encoder takes it only where a sample says it is smaller. For four-
// byte elements a delta's residuals are also grouped, before the planes, by the size the base
// says each will have (ChunkGrouping): how far the base itself moved and its exponent; zstd then
// codes each group with tables that fit it (R(2+1)D-18's run checkpoints: about 3 points of the
// file less).
// Chunks written before these two forms are XOR deltas (planes(raw XOR base)); they still decode.
//
// Encoded layout (little-endian): "RKC1" ("RKC2" for the difference and linear forms, "RKC3" for
// grouped ones, "RKC4" for grouped ones with their class counts, so that an older build refuses
// them as newer instead of misreading them), u8 form (its grouping in bits 6-7), u8 element
// width, u16 chain depth (0 for a full chunk, the base's depth + 1 for a delta: how many chunks a
// read decodes after this one; at least 2 for a delta that needs its base's base), u64 raw size,
// then for a delta the 32-byte SHA-256 of the base chunk's raw bytes, then one zstd frame (with
// its checksum) of raw-size bytes, after an RKC4 chunk's 128 class counts (u32 each: how many
// residuals each class holds, which spares the decoder counting them); a stored chunk has the
// raw bytes themselves instead of the frame.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/zstd.h"

namespace reel::registry {

// kStored: the raw bytes as they are, for a store whose owner turned compression off (the
// address still checks every read). kXorDelta: what builds before the difference forms wrote.
enum class ChunkForm : uint8_t {
  kFull = 0,
  kXorDelta = 1,
  kStored = 2,
  kDifference = 3,
  kLinear = 4,
};
// Whether chunks of this form name a base.
inline bool IsDelta(ChunkForm f) {
  return f == ChunkForm::kXorDelta || f == ChunkForm::kDifference || f == ChunkForm::kLinear;
}

// How a delta of four-byte elements orders its residuals before the planes (RKC3 chunks):
// kNone, element order; else grouped by a class each element's base gives, stably, so that
// residuals of one size sit together and zstd's per-block tables fit them. kByExponent: the
// class is the base's exponent (8 bands); kByStep: also how far the base moved from its own base
// (the exponent of float(base - before), the difference of bit patterns read as an int32, in 16
// bands of two binades), which needs `before` as a linear delta does. chunk_codec.cc has the exact
// bands; the decoder computes the same classes from the same bytes.
enum class ChunkGrouping : uint8_t { kNone = 0, kByExponent = 1, kByStep = 2 };

struct ChunkHeader {
  ChunkForm form = ChunkForm::kFull;
  ChunkGrouping grouping = ChunkGrouping::kNone;
  int element_width = 1;      // 1, 2, 4 or 8 bytes
  int depth = 0;              // 0 for a full chunk; a delta's base's depth + 1
  uint64_t raw_size = 0;      // a multiple of element_width
  std::string base_sha256;    // delta only: 64 hex digits of the base chunk's raw bytes
  bool class_counts = false;  // RKC4: the frame starts with the grouped residuals' class counts
};

// The base of a delta: its raw bytes, its own chain depth, and its address (64 hex digits) when
// the caller knows it (else EncodeChunk hashes `raw`). `before`: when the base is itself a delta,
// the raw bytes of the chunk it names as its base (what a read of the base's chain decodes just
// before it), else empty; it lets the encoder choose the linear form.
struct DeltaBase {
  std::string_view raw;
  int depth = 0;
  std::string_view sha256;
  std::string_view before;
};
// Whether a read of the chunk needs its base's base (DecodeChunk's `before`): a linear delta,
// or one grouped by its base's step.
inline bool NeedsBaseBefore(const ChunkHeader& h) {
  return h.form == ChunkForm::kLinear || h.grouping == ChunkGrouping::kByStep;
}
inline constexpr int kMaxChunkDepth = 65535;
// The longest header (a delta's): a read of this many bytes is enough for ReadChunkHeader.
inline constexpr size_t kMaxChunkHeaderBytes = 48;

// Which form a delta takes. kAuto: kLinear when DeltaBase::before is given and a sample of the
// elements says its residual is smaller, else kDifference; for four-byte elements grouped
// (kByStep when `before` is given, else kByExponent). The others are ungrouped, for tests of
// chunks older builds wrote (kXorDelta before the difference forms, kDifference and kLinear
// before grouping).
enum class DeltaCoding : uint8_t { kAuto, kDifference, kLinear, kXorDelta };

struct ChunkEncodeOptions {
  int zstd_level = 1;
  bool compress = true;  // false: kStored, and no delta
  DeltaCoding coding = DeltaCoding::kAuto;
  // A grouped delta records its classes' counts (RKC4), which the decoder then need not count;
  // false writes RKC3, as builds before them did (for tests of such chunks).
  bool record_class_counts = true;
};

// Encodes `raw` (whole elements of `element_width` bytes) alone when `base` is null, else as a
// delta against it, which must have the same size; stored as it is when options.compress is
// off. Errors: InvalidArgument for a width other than 1, 2, 4 or 8, a size that is not whole
// elements, a base (or before) of another size, a base already kMaxChunkDepth deep, a base
// without compression, or kLinear asked for without `before`.
Result<std::string> EncodeChunk(std::string_view raw, int element_width, const DeltaBase* base,
                                const ChunkEncodeOptions& options = {});

// What EncodeChunk with compression off writes before `raw` itself: a stored chunk is this
// header and then the raw bytes, which a writer can send as they are, without joining them.
// Errors: EncodeChunk's.
Result<std::string> StoredChunkHeader(std::string_view raw, int element_width);

// The header of an encoded chunk. Errors: DataLoss (naming `what`) for a bad magic, form, width
// or size; FailedPrecondition for a format version this build does not know.
Result<ChunkHeader> ReadChunkHeader(std::string_view encoded, std::string_view what);

// The raw bytes. For a delta, `base` is the base chunk's raw bytes (the caller fetched them by
// header.base_sha256 and checked them), and for a linear delta `before` is the base's base's; for
// a full chunk both must be empty. Errors: DataLoss (naming `what`) for a damaged chunk;
// InvalidArgument for a base or before of the wrong size, or one given to a chunk that takes
// none. The caller checks the result's SHA-256 against the chunk's address.
Result<std::string> DecodeChunk(std::string_view encoded, std::string_view base,
                                std::string_view what, std::string_view before = {});

// The raw bytes of the last chunk of `chain`: a full chunk, then deltas each taken against the
// chunk before it (oldest first), as a read fetched them by their base addresses. A chain of XOR
// deltas decodes at once: regrouping by significance is a permutation, so it commutes with XOR
// and the planes of the last chunk are the XOR of every link's planes, regrouped once. Other
// chains decode link by link, keeping the last two links' bytes for the next. Errors:
// InvalidArgument for an empty chain; DataLoss (naming `what`) for a damaged link, a chain that
// does not start full, a linear delta right after the full chunk, or links of different sizes or
// widths. Intermediate links are not checked against their addresses: the caller checks the
// result's SHA-256 against the last chunk's address, and decodes link by link with DecodeChunk to
// name a damaged one.
Result<std::string> DecodeChain(const std::vector<std::string_view>& chain, std::string_view what);
// The same into out[0, size), where the caller wants the bytes (a tensor's buffer); DataLoss when
// the chain holds another size. With `before` (size bytes) and a chain of at least two links,
// also the bytes of the link before the last: a delta against the last link may be linear.
// ZstdChecksum::kSkip for a caller that checks the result's address (a damaged link then shows
// as other bytes, not as a failed checksum).
Status DecodeChainInto(const std::vector<std::string_view>& chain, std::string_view what, char* out,
                       size_t size, char* before = nullptr,
                       ZstdChecksum checksum = ZstdChecksum::kVerify);

}  // namespace reel::registry
