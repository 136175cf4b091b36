#include "base/zstd.h"

// For ZSTD_d_forceIgnoreChecksum (zstd 1.4.7 and later; Debian 12 ships 1.5.4).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <memory>

namespace reel {
namespace {

struct FreeCCtx {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct FreeDCtx {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// One context of each kind per thread: creating one per call allocated and zeroed its tables
// for every 4 MB registry chunk. Null when zstd could not allocate one.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, FreeCCtx> cctx(ZSTD_createCCtx());
  if (cctx != nullptr) ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_and_parameters);
  return cctx.get();
}
ZSTD_DCtx* ThreadDCtx(ZstdChecksum checksum) {
  thread_local std::unique_ptr<ZSTD_DCtx, FreeDCtx> dctx(ZSTD_createDCtx());
  if (dctx == nullptr) return nullptr;
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_and_parameters);
  if (checksum == ZstdChecksum::kSkip &&
      ZSTD_isError(
          ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_forceIgnoreChecksum, ZSTD_d_ignoreChecksum))) {
    return nullptr;
  }
  return dctx.get();
}

std::string Prefix(std::string_view what) { return std::string(what) + ": "; }

}  // namespace

Status ZstdCompressAppend(std::string_view data, const ZstdOptions& options, std::string* out) {
  if (options.level < ZSTD_minCLevel() || options.level > ZSTD_maxCLevel()) {
    return InvalidArgumentError("zstd level " + std::to_string(options.level) + " is outside [" +
                                std::to_string(ZSTD_minCLevel()) + ", " +
                                std::to_string(ZSTD_maxCLevel()) + "]");
  }
  const ZSTD_bounds hash_logs = ZSTD_cParam_getBounds(ZSTD_c_hashLog);
  if (options.hash_log != 0 &&
      (options.hash_log < hash_logs.lowerBound || options.hash_log > hash_logs.upperBound)) {
    return InvalidArgumentError("zstd hash_log " + std::to_string(options.hash_log) +
                                " is neither 0 nor in [" + std::to_string(hash_logs.lowerBound) +
                                ", " + std::to_string(hash_logs.upperBound) + "]");
  }
  const size_t bound = ZSTD_compressBound(data.size());
  if (ZSTD_isError(bound)) {
    return InvalidArgumentError(std::to_string(data.size()) +
                                " bytes are too many for one zstd frame");
  }
  ZSTD_CCtx* cctx = ThreadCCtx();
  if (cctx == nullptr) return InternalError("zstd: cannot create a compression context");
  size_t rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options.level);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  // Set on every call, 0 too: the context is the thread's, and keeps what the last caller set.
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, options.hash_log);
  const size_t start = out->size();
  out->resize(start + bound);
  if (!ZSTD_isError(rc)) {
    rc = ZSTD_compress2(cctx, out->data() + start, bound, data.data(), data.size());
  }
  if (ZSTD_isError(rc)) {
    out->resize(start);
    return InternalError(std::string("zstd compression failed: ") + ZSTD_getErrorName(rc));
  }
  out->resize(start + rc);
  return Status::Ok();
}

Result<uint64_t> ZstdContentSize(std::string_view frame, std::string_view what) {
  const size_t size = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(size)) {
    return DataLossError(Prefix(what) +
                         "truncated or corrupt zstd frame: " + ZSTD_getErrorName(size));
  }
  if (size != frame.size()) {
    return DataLossError(Prefix(what) + std::to_string(frame.size() - size) +
                         " bytes after its zstd frame");
  }
  const unsigned long long content = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN) {
    return DataLossError(Prefix(what) + "zstd frame does not record its content size");
  }
  return static_cast<uint64_t>(content);
}

Result<std::string> ZstdDecompress(std::string_view frame, uint64_t max_size,
                                   std::string_view what) {
  REEL_ASSIGN_OR_RETURN(uint64_t content, ZstdContentSize(frame, what));
  if (content > max_size) {
    return ResourceExhaustedError(Prefix(what) + "zstd frame decodes to " +
                                  std::to_string(content) + " bytes, over the limit of " +
                                  std::to_string(max_size));
  }
  std::string out(static_cast<size_t>(content), '\0');
  REEL_RETURN_IF_ERROR(ZstdDecompressInto(frame, out.data(), out.size(), what));
  return out;
}

Status ZstdDecompressInto(std::string_view frame, char* out, size_t size, std::string_view what,
                          ZstdChecksum checksum) {
  REEL_ASSIGN_OR_RETURN(uint64_t content, ZstdContentSize(frame, what));
  if (content != size) {
    return DataLossError(Prefix(what) + "zstd frame holds " + std::to_string(content) + " bytes, " +
                         std::to_string(size) + " expected");
  }
  ZSTD_DCtx* dctx = ThreadDCtx(checksum);
  if (dctx == nullptr) return InternalError("zstd: cannot create a decompression context");
  const size_t rc = ZSTD_decompressDCtx(dctx, out, size, frame.data(), frame.size());
  if (ZSTD_isError(rc)) {
    return DataLossError(Prefix(what) + "zstd decompression failed: " + ZSTD_getErrorName(rc));
  }
  if (rc != content) {
    return DataLossError(Prefix(what) + "zstd frame decompressed to " + std::to_string(rc) +
                         " bytes, " + std::to_string(content) + " recorded");
  }
  return Status::Ok();
}

}  // namespace reel
