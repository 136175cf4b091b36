#include "registry/chunk_codec.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstring>
#include <limits>
#include <optional>

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
// element byte when kXor, for elements [begin, n). Direction and XOR are template arguments, so
// the inner loop carries no branch.
template <int W, bool kToPlanes, bool kXor>
void PlanesScalar(const uint8_t* in, const uint8_t* base, size_t begin, size_t n, uint8_t* out) {
  for (size_t i = begin; i < n; ++i) {
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

#if defined(__SSE2__)
// Four-byte elements (F32, I32: nearly every weight) sixteen at a time with SSE2, which every
// x86-64 has: the byte loop above ran at a fraction of zstd's speed and was the push's largest
// cost after it. Both directions are byte transposes built from unpack steps.
template <bool kXor>
__m128i LoadElements(const uint8_t* in, const uint8_t* base, size_t offset) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + offset));
  if (kXor) v = _mm_xor_si128(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + offset)));
  return v;
}

// Elements a (0-3) and b (4-7) to [plane 0 | plane 1] and [plane 2 | plane 3] of those eight
// elements: three rounds of interleaving bytes.
inline void EightToPlanes(__m128i a, __m128i b, __m128i* planes01, __m128i* planes23) {
  const __m128i u0 = _mm_unpacklo_epi8(a, b), u1 = _mm_unpackhi_epi8(a, b);
  const __m128i v0 = _mm_unpacklo_epi8(u0, u1), v1 = _mm_unpackhi_epi8(u0, u1);
  *planes01 = _mm_unpacklo_epi8(v0, v1);
  *planes23 = _mm_unpackhi_epi8(v0, v1);
}

template <bool kXor>
void ToPlanes4(const uint8_t* in, const uint8_t* base, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i w01_lo, w23_lo, w01_hi, w23_hi;  // elements 0-7 and 8-15
    EightToPlanes(LoadElements<kXor>(in, base, 4 * i), LoadElements<kXor>(in, base, 4 * i + 16),
                  &w01_lo, &w23_lo);
    EightToPlanes(LoadElements<kXor>(in, base, 4 * i + 32),
                  LoadElements<kXor>(in, base, 4 * i + 48), &w01_hi, &w23_hi);
    const __m128i planes[4] = {
        _mm_unpacklo_epi64(w01_lo, w01_hi), _mm_unpackhi_epi64(w01_lo, w01_hi),
        _mm_unpacklo_epi64(w23_lo, w23_hi), _mm_unpackhi_epi64(w23_lo, w23_hi)};
    for (int p = 0; p < 4; ++p) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + p * n + i), planes[p]);
    }
  }
  PlanesScalar<4, true, kXor>(in, base, i, n, out);
}

template <bool kXor>
void FromPlanes4(const uint8_t* in, const uint8_t* base, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i p[4];
    for (int k = 0; k < 4; ++k) {
      p[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k * n + i));
    }
    // Pairs (byte 0, byte 1) and (byte 2, byte 3) per element, then the pairs joined.
    const __m128i x0 = _mm_unpacklo_epi8(p[0], p[1]), x1 = _mm_unpackhi_epi8(p[0], p[1]);
    const __m128i y0 = _mm_unpacklo_epi8(p[2], p[3]), y1 = _mm_unpackhi_epi8(p[2], p[3]);
    const __m128i elements[4] = {_mm_unpacklo_epi16(x0, y0), _mm_unpackhi_epi16(x0, y0),
                                 _mm_unpacklo_epi16(x1, y1), _mm_unpackhi_epi16(x1, y1)};
    for (int k = 0; k < 4; ++k) {
      __m128i e = elements[k];
      if (kXor) {
        e = _mm_xor_si128(e,
                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + 4 * i + 16 * k)));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i + 16 * k), e);
    }
  }
  PlanesScalar<4, false, kXor>(in, base, i, n, out);
}
#endif

template <int W, bool kToPlanes, bool kXor>
void Planes(const uint8_t* in, const uint8_t* base, size_t n, uint8_t* out) {
#if defined(__SSE2__)
  if constexpr (W == 4) {
    if constexpr (kToPlanes) {
      ToPlanes4<kXor>(in, base, n, out);
    } else {
      FromPlanes4<kXor>(in, base, n, out);
    }
    return;
  }
#endif
  PlanesScalar<W, kToPlanes, kXor>(in, base, 0, n, out);
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

// acc ^= link: sixteen bytes at a time where SSE2 is, else eight (memcpy keeps it free of
// aliasing and alignment rules).
void XorInto(std::string* acc, const std::string& link) {
  char* a = acc->data();
  const char* b = link.data();
  const size_t n = acc->size();
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a + i), _mm_xor_si128(x, y));
  }
#endif
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(a + i, &x, 8);
  }
  for (; i < n; ++i) a[i] = static_cast<char>(a[i] ^ b[i]);
}

size_t BodyOffset(ChunkForm form) {
  return kHeaderBytes + (form == ChunkForm::kDelta ? kBaseHashBytes : 0);
}

// A stored chunk's body: exactly its raw bytes.
Result<std::string_view> StoredBody(std::string_view encoded, const ChunkHeader& h,
                                    std::string_view what) {
  const std::string_view body = encoded.substr(BodyOffset(h.form));
  if (body.size() != h.raw_size) {
    return DataLossError(Prefix(what) + "stored chunk holds " + std::to_string(body.size()) +
                         " bytes, its header says " + std::to_string(h.raw_size));
  }
  return body;
}

Result<std::string> StoredBytes(std::string_view encoded, const ChunkHeader& h,
                                std::string_view what) {
  REEL_ASSIGN_OR_RETURN(std::string_view body, StoredBody(encoded, h, what));
  return std::string(body);
}

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
  if (delta && !options.compress) {
    return InvalidArgumentError("a delta chunk needs compression: zstd of the XOR is its point");
  }
  const int depth = delta ? delta_base->depth + 1 : 0;
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  const ChunkForm form =
      delta ? ChunkForm::kDelta : (options.compress ? ChunkForm::kFull : ChunkForm::kStored);
  out[4] = static_cast<char>(form);
  out[5] = static_cast<char>(element_width);
  out[6] = static_cast<char>(depth & 0xff);
  out[7] = static_cast<char>(depth >> 8);
  PutU64(out.data() + 8, raw.size());
  if (form == ChunkForm::kStored) {
    out += raw;
    return out;
  }
  if (delta) {
    if (delta_base->sha256.empty()) {
      out += Sha256Raw(base);
    } else {
      const std::optional<std::string> address = HexDecode(delta_base->sha256);
      if (!address.has_value() || address->size() != kBaseHashBytes) {
        return InvalidArgumentError("delta base address '" + std::string(delta_base->sha256) +
                                    "' is not a SHA-256");
      }
      out += *address;
    }
  }

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
  if (form > 2) return DataLossError(Prefix(what) + "unknown chunk form " + std::to_string(form));
  h.form = static_cast<ChunkForm>(form);
  h.element_width = static_cast<uint8_t>(encoded[5]);
  h.depth = static_cast<uint8_t>(encoded[6]) | static_cast<uint8_t>(encoded[7]) << 8;
  if (!ValidWidth(h.element_width) || (h.form == ChunkForm::kDelta) != (h.depth > 0)) {
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
  if (h.form == ChunkForm::kStored) return StoredBytes(encoded, h, what);
  REEL_ASSIGN_OR_RETURN(std::string planes,
                        ZstdDecompress(encoded.substr(BodyOffset(h.form)), h.raw_size, what));
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

Status DecodeChainInto(const std::vector<std::string_view>& chain, std::string_view what, char* out,
                       size_t size) {
  if (chain.empty()) return InvalidArgumentError(Prefix(what) + "an empty chunk chain");
  REEL_ASSIGN_OR_RETURN(const ChunkHeader first, ReadChunkHeader(chain.front(), what));
  if (first.form == ChunkForm::kDelta) {
    return DataLossError(Prefix(what) + "a chunk chain that does not start with a whole chunk");
  }
  if (first.raw_size != size) {
    return DataLossError(Prefix(what) + "chunk of " + std::to_string(first.raw_size) +
                         " bytes where " + std::to_string(size) + " were expected");
  }
  // Scratch reused by each thread: a fresh 4 MiB buffer per chunk cost more in page faults
  // than zstd took to fill it.
  thread_local std::string planes, link;
  planes.resize(size);
  if (first.form == ChunkForm::kStored) {
    REEL_ASSIGN_OR_RETURN(std::string_view body, StoredBody(chain.front(), first, what));
    if (chain.size() == 1) {
      std::memcpy(out, body.data(), size);
      return Status::Ok();
    }
    PlanesFor<true, false>(first.element_width)(Bytes(body), nullptr, size / first.element_width,
                                                reinterpret_cast<uint8_t*>(planes.data()));
  } else {
    REEL_RETURN_IF_ERROR(ZstdDecompressInto(chain.front().substr(BodyOffset(first.form)),
                                            planes.data(), size, what));
  }
  for (size_t k = 1; k < chain.size(); ++k) {
    REEL_ASSIGN_OR_RETURN(const ChunkHeader h, ReadChunkHeader(chain[k], what));
    if (h.form != ChunkForm::kDelta || h.raw_size != size ||
        h.element_width != first.element_width) {
      return DataLossError(Prefix(what) + "link " + std::to_string(k) +
                           " of its chunk chain is not a delta of the same size and width");
    }
    link.resize(size);
    REEL_RETURN_IF_ERROR(
        ZstdDecompressInto(chain[k].substr(BodyOffset(h.form)), link.data(), size, what));
    XorInto(&planes, link);
  }
  PlanesFor<false, false>(first.element_width)(Bytes(planes), nullptr, size / first.element_width,
                                               reinterpret_cast<uint8_t*>(out));
  return Status::Ok();
}

Result<std::string> DecodeChain(const std::vector<std::string_view>& chain, std::string_view what) {
  if (chain.empty()) return InvalidArgumentError(Prefix(what) + "an empty chunk chain");
  REEL_ASSIGN_OR_RETURN(const ChunkHeader first, ReadChunkHeader(chain.front(), what));
  std::string raw(first.raw_size, '\0');
  REEL_RETURN_IF_ERROR(DecodeChainInto(chain, what, raw.data(), raw.size()));
  return raw;
}

}  // namespace reel::registry
