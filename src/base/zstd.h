// zstd frames as Reel stores them: one frame per payload, with its content size recorded (so a
// reader checks the size before it allocates) and zstd's checksum (so a flipped bit is DataLoss,
// not wrong bytes). Used by the dataset's frames payloads and the registry's weight chunks.
// Thread-safety: free functions, reentrant (each thread keeps its own zstd contexts).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace reel {

struct ZstdOptions {
  int level = 3;  // zstd's levels: negative (fastest) to 22
  // log2 of the match finder's hash table; 0: the level's own. A small table (6) finds fewer
  // matches, which in noise-like bytes (a tensor's low byte planes) cost more than they save.
  int hash_log = 0;
};

// Appends one frame holding `data` to `*out`. Errors: InvalidArgument for a level or hash_log zstd
// does not take, or data too large for one frame; Internal when zstd itself fails.
Status ZstdCompressAppend(std::string_view data, const ZstdOptions& options, std::string* out);

// The content size `frame` records. Errors (DataLoss, naming `what`): not a complete zstd
// frame, bytes after it, or no recorded size.
Result<uint64_t> ZstdContentSize(std::string_view frame, std::string_view what);

// The bytes of `frame`, which must be exactly one frame (as ZstdContentSize checks) of at most
// `max_size` bytes. Errors: ResourceExhausted over max_size; DataLoss (naming `what`) for a
// corrupt frame or a checksum mismatch.
Result<std::string> ZstdDecompress(std::string_view frame, uint64_t max_size,
                                   std::string_view what);

// Whether a decode checks the frame's checksum. kSkip is for a caller that checks the bytes by
// other means anyway (a weight chunk's chain, hashed against its address once decoded): the
// checksum is about a quarter of the decode's time on a weight chunk.
enum class ZstdChecksum { kVerify, kSkip };

// Decodes `frame`, which must be exactly one frame of exactly `size` bytes, into out[0, size):
// for callers that reuse one buffer. Errors: DataLoss (naming `what`) for a corrupt frame, a
// checksum mismatch (kVerify) or another content size.
Status ZstdDecompressInto(std::string_view frame, char* out, size_t size, std::string_view what,
                          ZstdChecksum checksum = ZstdChecksum::kVerify);

}  // namespace reel
