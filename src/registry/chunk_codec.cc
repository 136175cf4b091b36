#include "registry/chunk_codec.h"

#include <cstring>
#include <limits>

#include "base/hash.h"
#include "base/zstd.h"

namespace reel::registry {
namespace {

constexpr std::string_view kMagic = "RKC1";
constexpr size_t kHeaderBytes = 16;
constexpr size_t kBaseHashBytes = 32;

bool ValidWidth(int w) { return w == 1 || w == 2 || w == 4 || w == 8; }

void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// One kernel both ways: element byte i * W + p <-> plane byte p * n + i, XORed with the base's
// element byte when kXor. Direction and XOR are template arguments, so the inner loop carries no
// branch.
template <int W, bool kToPlanes, bool kXor>
void Planes(const uint8_t* in, const uint8_t* base, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    for (int p = 0; p < W; ++p) {
      const size_t element = i * W + p, plane = p * n + i;
      const uint8_t b = kXor ? base[element] : 0;
      if (kToPlanes) {
        out[plane] = in[element] ^ b;
      } else {
        out[element] = in[plane] ^ b;
      }
    }
  }
}

using PlaneFn = void (*)(const uint8_t*, const uint8_t*, size_t, uint8_t*);
template <bool kToPlanes, bool kXor>
PlaneFn PlanesFor(int w) {
  switch (w) {
    case 1:
      return Planes<1, kToPlanes, kXor>;
    case 2:
      return Planes<2, kToPlanes, kXor>;
    case 4:
      return Planes<4, kToPlanes, kXor>;
    default:
      return Planes<8, kToPlanes, kXor>;
  }
}

const uint8_t* Bytes(std::string_view s) {
  return s.empty() ? nullptr : reinterpret_cast<const uint8_t*>(s.data());
}

std::string Prefix(std::string_view what) { return std::string(what) + ": "; }

}  // namespace

Result<std::string> EncodeChunk(std::string_view raw, int element_width,
                                const DeltaBase* delta_base, const ChunkEncodeOptions& options) {
  if (!ValidWidth(element_width)) {
    return InvalidArgumentError("chunk element width " + std::to_string(element_width) +
                                " is not 1, 2, 4 or 8");
  }
  if (raw.size() % element_width != 0) {
    return InvalidArgumentError("chunk of " + std::to_string(raw.size()) +
                                " bytes is not whole elements of " + std::to_string(element_width));
  }
  const bool delta = delta_base != nullptr;
  const std::string_view base = delta ? delta_base->raw : std::string_view();
  if (delta && base.size() != raw.size()) {
    return InvalidArgumentError("delta base has " + std::to_string(base.size()) +
                                " bytes, the chunk " + std::to_string(raw.size()));
  }
  if (delta && (delta_base->depth < 0 || delta_base->depth >= kMaxChunkDepth)) {
    return InvalidArgumentError("delta base depth " + std::to_string(delta_base->depth) +
                                " is outside [0, " + std::to_string(kMaxChunkDepth) + ")");
  }
  const int depth = delta ? delta_base->depth + 1 : 0;
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  out[4] = static_cast<char>(delta ? ChunkForm::kDelta : ChunkForm::kFull);
  out[5] = static_cast<char>(element_width);
  out[6] = static_cast<char>(depth & 0xff);
  out[7] = static_cast<char>(depth >> 8);
  PutU64(out.data() + 8, raw.size());
  if (delta) out += Sha256Raw(base);

  std::string planes(raw.size(), '\0');
  const PlaneFn to_planes =
      delta ? PlanesFor<true, true>(element_width) : PlanesFor<true, false>(element_width);
  to_planes(Bytes(raw), Bytes(base), raw.size() / element_width,
            reinterpret_cast<uint8_t*>(planes.data()));
  REEL_RETURN_IF_ERROR(ZstdCompressAppend(planes, ZstdOptions{options.zstd_level}, &out));
  return out;
}

Result<ChunkHeader> ReadChunkHeader(std::string_view encoded, std::string_view what) {
  if (encoded.size() < kHeaderBytes || encoded.substr(0, 3) != kMagic.substr(0, 3)) {
    return DataLossError(Prefix(what) + "not a registry chunk (bad magic or truncated header)");
  }
  if (encoded[3] != kMagic[3]) {
    return FailedPreconditionError(Prefix(what) + "chunk format '" +
                                   std::string(encoded.substr(0, 4)) +
                                   "' is newer than this build reads ('RKC1')");
  }
  ChunkHeader h;
  const auto form = static_cast<uint8_t>(encoded[4]);
  if (form > 1) return DataLossError(Prefix(what) + "unknown chunk form " + std::to_string(form));
  h.form = static_cast<ChunkForm>(form);
  h.element_width = static_cast<uint8_t>(encoded[5]);
  h.depth = static_cast<uint8_t>(encoded[6]) | static_cast<uint8_t>(encoded[7]) << 8;
  if (!ValidWidth(h.element_width) || (h.form == ChunkForm::kFull) != (h.depth == 0)) {
    return DataLossError(Prefix(what) + "corrupt chunk header");
  }
  h.raw_size = GetU64(encoded.data() + 8);
  if (h.raw_size % h.element_width != 0) {
    return DataLossError(Prefix(what) + "chunk size " + std::to_string(h.raw_size) +
                         " is not whole elements of " + std::to_string(h.element_width));
  }
  if (h.form == ChunkForm::kDelta) {
    if (encoded.size() < kHeaderBytes + kBaseHashBytes) {
      return DataLossError(Prefix(what) + "truncated delta chunk header");
    }
    h.base_sha256 = HexEncode(encoded.substr(kHeaderBytes, kBaseHashBytes));
  }
  return h;
}

Result<std::string> DecodeChunk(std::string_view encoded, std::string_view base,
                                std::string_view what) {
  REEL_ASSIGN_OR_RETURN(ChunkHeader h, ReadChunkHeader(encoded, what));
  const bool delta = h.form == ChunkForm::kDelta;
  if (delta && base.size() != h.raw_size) {
    return InvalidArgumentError(Prefix(what) + "delta chunk of " + std::to_string(h.raw_size) +
                                " bytes given a base of " + std::to_string(base.size()));
  }
  if (!delta && !base.empty()) {
    return InvalidArgumentError(Prefix(what) + "a full chunk takes no base");
  }
  const size_t body = kHeaderBytes + (delta ? kBaseHashBytes : 0);
  REEL_ASSIGN_OR_RETURN(std::string planes, ZstdDecompress(encoded.substr(body), h.raw_size, what));
  if (planes.size() != h.raw_size) {
    return DataLossError(Prefix(what) + "chunk holds " + std::to_string(planes.size()) +
                         " bytes, its header says " + std::to_string(h.raw_size));
  }
  std::string raw(planes.size(), '\0');
  const PlaneFn from_planes =
      delta ? PlanesFor<false, true>(h.element_width) : PlanesFor<false, false>(h.element_width);
  from_planes(Bytes(planes), Bytes(base), planes.size() / h.element_width,
              reinterpret_cast<uint8_t*>(raw.data()));
  return raw;
}

}  // namespace reel::registry
