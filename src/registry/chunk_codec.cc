#include "registry/chunk_codec.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "base/hash.h"
#include "base/zstd.h"

namespace reel::registry {
namespace {

constexpr std::string_view kMagic = "RKC1";
constexpr std::string_view kMagicDifference = "RKC2";  // the difference and linear forms
constexpr std::string_view kMagicGrouped = "RKC3";     // either, grouped (ChunkGrouping)
constexpr std::string_view kMagicCounted = "RKC4";     // grouped, the classes' counts recorded
constexpr uint8_t kFormBits = 0x3f;                    // the form byte's form; above, its grouping
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

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "elements are read as little-endian integers, as chunks store them");

// Elements as unsigned integers of their width; arithmetic wraps, so each step inverts exactly.
template <int W>
using Element = std::conditional_t<
    W == 1, uint8_t,
    std::conditional_t<W == 2, uint16_t, std::conditional_t<W == 4, uint32_t, uint64_t>>>;

// What the planes hold for an element: itself, its XOR with the base, or the zigzag of its
// difference from the base or from the base extrapolated by the base's own step.
enum class Op { kNone, kXor, kDifference, kLinear };

Op OpOf(ChunkForm form) {
  switch (form) {
    case ChunkForm::kXorDelta:
      return Op::kXor;
    case ChunkForm::kDifference:
      return Op::kDifference;
    case ChunkForm::kLinear:
      return Op::kLinear;
    default:
      return Op::kNone;
  }
}

template <typename U>
U ZigZag(U d) {
  using S = std::make_signed_t<U>;
  return static_cast<U>(static_cast<U>(d << 1) ^
                        static_cast<U>(static_cast<S>(d) >> (8 * sizeof(U) - 1)));
}
template <typename U>
U UnZigZag(U z) {
  return static_cast<U>(static_cast<U>(z >> 1) ^ static_cast<U>(0 - (z & 1)));
}

template <typename U>
U Load(const uint8_t* p, size_t i) {
  U v;
  std::memcpy(&v, p + i * sizeof(U), sizeof(U));
  return v;
}

template <typename U, Op kOp>
U Predict(const uint8_t* base, const uint8_t* before, size_t i) {
  if constexpr (kOp == Op::kLinear) {
    return static_cast<U>(2 * Load<U>(base, i) - Load<U>(before, i));
  } else if constexpr (kOp == Op::kNone) {
    return 0;
  } else {
    return Load<U>(base, i);
  }
}

template <typename U, Op kOp>
U Forward(U raw, U predicted) {
  if constexpr (kOp == Op::kNone) return raw;
  if constexpr (kOp == Op::kXor) return raw ^ predicted;
  return ZigZag<U>(static_cast<U>(raw - predicted));
}
template <typename U, Op kOp>
U Inverse(U stored, U predicted) {
  if constexpr (kOp == Op::kNone) return stored;
  if constexpr (kOp == Op::kXor) return stored ^ predicted;
  return static_cast<U>(predicted + UnZigZag(stored));
}

// One kernel both ways: element i (bytes i * W .. i * W + W - 1) <-> plane bytes p * n + i,
// through Forward or Inverse, for elements [begin, n). Direction and op are template arguments,
// so the inner loop carries no branch.
template <int W, bool kToPlanes, Op kOp>
void PlanesScalar(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t begin,
                  size_t n, uint8_t* out) {
  using U = Element<W>;
  for (size_t i = begin; i < n; ++i) {
    const U predicted = Predict<U, kOp>(base, before, i);
    if constexpr (kToPlanes) {
      const U v = Forward<U, kOp>(Load<U>(in, i), predicted);
      for (int p = 0; p < W; ++p) out[p * n + i] = static_cast<uint8_t>(v >> (8 * p));
    } else {
      U stored = 0;
      for (int p = 0; p < W; ++p) stored |= static_cast<U>(U{in[p * n + i]} << (8 * p));
      const U v = Inverse<U, kOp>(stored, predicted);
      std::memcpy(out + i * W, &v, W);
    }
  }
}

#if defined(__SSE2__)
// Four-byte elements (F32, I32: nearly every weight) sixteen at a time with SSE2, which every
// x86-64 has: the byte loop above ran at a fraction of zstd's speed and was the push's largest
// cost after it. Both directions are byte transposes built from unpack steps, with the op on four
// elements at a time on the element side.
__m128i Load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

template <Op kOp>
__m128i Predict4(const uint8_t* base, const uint8_t* before, size_t offset) {
  if constexpr (kOp == Op::kNone) return _mm_setzero_si128();
  const __m128i b = Load128(base + offset);
  if constexpr (kOp == Op::kLinear)
    return _mm_sub_epi32(_mm_slli_epi32(b, 1), Load128(before + offset));
  return b;
}

template <Op kOp>
__m128i Forward4(__m128i raw, __m128i predicted) {
  if constexpr (kOp == Op::kNone) return raw;
  if constexpr (kOp == Op::kXor) return _mm_xor_si128(raw, predicted);
  const __m128i d = _mm_sub_epi32(raw, predicted);
  return _mm_xor_si128(_mm_slli_epi32(d, 1), _mm_srai_epi32(d, 31));
}

template <Op kOp>
__m128i Inverse4(__m128i stored, __m128i predicted) {
  if constexpr (kOp == Op::kNone) return stored;
  if constexpr (kOp == Op::kXor) return _mm_xor_si128(stored, predicted);
  const __m128i sign = _mm_sub_epi32(_mm_setzero_si128(), _mm_and_si128(stored, _mm_set1_epi32(1)));
  return _mm_add_epi32(predicted, _mm_xor_si128(_mm_srli_epi32(stored, 1), sign));
}

template <Op kOp>
__m128i LoadElements(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t offset) {
  return Forward4<kOp>(Load128(in + offset), Predict4<kOp>(base, before, offset));
}

// Elements a (0-3) and b (4-7) to [plane 0 | plane 1] and [plane 2 | plane 3] of those eight
// elements: three rounds of interleaving bytes.
inline void EightToPlanes(__m128i a, __m128i b, __m128i* planes01, __m128i* planes23) {
  const __m128i u0 = _mm_unpacklo_epi8(a, b), u1 = _mm_unpackhi_epi8(a, b);
  const __m128i v0 = _mm_unpacklo_epi8(u0, u1), v1 = _mm_unpackhi_epi8(u0, u1);
  *planes01 = _mm_unpacklo_epi8(v0, v1);
  *planes23 = _mm_unpackhi_epi8(v0, v1);
}

template <Op kOp>
void ToPlanes4(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t n,
               uint8_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i w01_lo, w23_lo, w01_hi, w23_hi;  // elements 0-7 and 8-15
    EightToPlanes(LoadElements<kOp>(in, base, before, 4 * i),
                  LoadElements<kOp>(in, base, before, 4 * i + 16), &w01_lo, &w23_lo);
    EightToPlanes(LoadElements<kOp>(in, base, before, 4 * i + 32),
                  LoadElements<kOp>(in, base, before, 4 * i + 48), &w01_hi, &w23_hi);
    const __m128i planes[4] = {
        _mm_unpacklo_epi64(w01_lo, w01_hi), _mm_unpackhi_epi64(w01_lo, w01_hi),
        _mm_unpacklo_epi64(w23_lo, w23_hi), _mm_unpackhi_epi64(w23_lo, w23_hi)};
    for (int p = 0; p < 4; ++p) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + p * n + i), planes[p]);
    }
  }
  PlanesScalar<4, true, kOp>(in, base, before, i, n, out);
}

template <Op kOp>
void FromPlanes4(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t n,
                 uint8_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i p[4];
    for (int k = 0; k < 4; ++k) p[k] = Load128(in + k * n + i);
    // Pairs (byte 0, byte 1) and (byte 2, byte 3) per element, then the pairs joined.
    const __m128i x0 = _mm_unpacklo_epi8(p[0], p[1]), x1 = _mm_unpackhi_epi8(p[0], p[1]);
    const __m128i y0 = _mm_unpacklo_epi8(p[2], p[3]), y1 = _mm_unpackhi_epi8(p[2], p[3]);
    const __m128i elements[4] = {_mm_unpacklo_epi16(x0, y0), _mm_unpackhi_epi16(x0, y0),
                                 _mm_unpacklo_epi16(x1, y1), _mm_unpackhi_epi16(x1, y1)};
    for (int k = 0; k < 4; ++k) {
      const size_t offset = 4 * i + 16 * k;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + offset),
                       Inverse4<kOp>(elements[k], Predict4<kOp>(base, before, offset)));
    }
  }
  PlanesScalar<4, false, kOp>(in, base, before, i, n, out);
}
#endif

template <int W, bool kToPlanes, Op kOp>
void Planes(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t n, uint8_t* out) {
#if defined(__SSE2__)
  if constexpr (W == 4) {
    if constexpr (kToPlanes) {
      ToPlanes4<kOp>(in, base, before, n, out);
    } else {
      FromPlanes4<kOp>(in, base, before, n, out);
    }
    return;
  }
#endif
  PlanesScalar<W, kToPlanes, kOp>(in, base, before, 0, n, out);
}

using PlaneFn = void (*)(const uint8_t*, const uint8_t*, const uint8_t*, size_t, uint8_t*);
template <bool kToPlanes, Op kOp>
PlaneFn PlanesForOp(int w) {
  switch (w) {
    case 1:
      return Planes<1, kToPlanes, kOp>;
    case 2:
      return Planes<2, kToPlanes, kOp>;
    case 4:
      return Planes<4, kToPlanes, kOp>;
    default:
      return Planes<8, kToPlanes, kOp>;
  }
}
// The kernel for elements of `w` bytes and chunks of `form`.
template <bool kToPlanes>
PlaneFn PlanesFor(int w, ChunkForm form) {
  switch (OpOf(form)) {
    case Op::kXor:
      return PlanesForOp<kToPlanes, Op::kXor>(w);
    case Op::kDifference:
      return PlanesForOp<kToPlanes, Op::kDifference>(w);
    case Op::kLinear:
      return PlanesForOp<kToPlanes, Op::kLinear>(w);
    case Op::kNone:
      break;
  }
  return PlanesForOp<kToPlanes, Op::kNone>(w);
}

// ---- grouping (four-byte elements) -----------------------------------------------------------

constexpr int kGroupClasses = 8 * 16;

// Each element's class from its base (and the base's base): the base's exponent in 8 bands (from
// 2^-11, where weights start to matter, to 2^-4), and for kByStep 8 x the band of the base's own
// step: the exponent of float(base - before), the bit patterns' difference read as an int32, in
// 16 bands of two binades. Both say how large the element's residual will be. (The float
// conversion stands in for a bit length: SSE2 has it, and IEEE rounding to nearest, every
// platform's default, makes it the same everywhere; were it not, the pull's check of every chunk
// against its address would say so.)
int ExponentBand(uint32_t base) {
  return std::clamp(static_cast<int>(base >> 23 & 0xff) - 116, 0, 7);
}
int StepBand(uint32_t base, uint32_t before) {
  const auto step = static_cast<float>(static_cast<int32_t>(base - before));
  uint32_t bits;
  std::memcpy(&bits, &step, sizeof bits);
  return std::clamp((static_cast<int>(bits >> 23 & 0xff) - 125) >> 1, 0, 15);
}

void GroupClassesScalar(const uint8_t* base, const uint8_t* before, size_t begin, size_t n,
                        uint8_t* classes) {
  for (size_t i = begin; i < n; ++i) {
    const auto b = Load<uint32_t>(base, i);
    const int step = before != nullptr ? StepBand(b, Load<uint32_t>(before, i)) : 0;
    classes[i] = static_cast<uint8_t>(8 * step + ExponentBand(b));
  }
}

#if defined(__SSE2__)
// Bits 23-30 of four words: a float's exponent field.
__m128i ExponentField(__m128i words) {
  return _mm_and_si128(_mm_srli_epi32(words, 23), _mm_set1_epi32(0xff));
}

// GroupClassesScalar eight elements a step: the fields in 16-bit lanes, clamped there (SSE2 has
// min and max for those), packed to bytes.
void GroupClasses(const uint8_t* base, const uint8_t* before, size_t n, uint8_t* classes) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b0 = Load128(base + 4 * i), b1 = Load128(base + 4 * i + 16);
    const __m128i exponent = _mm_packs_epi32(ExponentField(b0), ExponentField(b1));
    __m128i group = _mm_min_epi16(
        _mm_max_epi16(_mm_sub_epi16(exponent, _mm_set1_epi16(116)), _mm_setzero_si128()),
        _mm_set1_epi16(7));
    if (before != nullptr) {
      const auto step_field = [&](__m128i b, size_t at) {
        return ExponentField(
            _mm_castps_si128(_mm_cvtepi32_ps(_mm_sub_epi32(b, Load128(before + at)))));
      };
      const __m128i field = _mm_packs_epi32(step_field(b0, 4 * i), step_field(b1, 4 * i + 16));
      const __m128i band =
          _mm_min_epi16(_mm_max_epi16(_mm_srai_epi16(_mm_sub_epi16(field, _mm_set1_epi16(125)), 1),
                                      _mm_setzero_si128()),
                        _mm_set1_epi16(15));
      group = _mm_add_epi16(group, _mm_slli_epi16(band, 3));
    }
    _mm_storel_epi64(reinterpret_cast<__m128i*>(classes + i), _mm_packus_epi16(group, group));
  }
  GroupClassesScalar(base, before, i, n, classes);
}
#else
void GroupClasses(const uint8_t* base, const uint8_t* before, size_t n, uint8_t* classes) {
  GroupClassesScalar(base, before, 0, n, classes);
}
#endif

using ClassCounts = std::array<uint32_t, kGroupClasses>;
// An RKC4 chunk's frame starts with its ClassCounts, four bytes each, little-endian.
constexpr size_t kClassCountBytes = 4 * kGroupClasses;

ClassCounts CountClasses(const uint8_t* classes, size_t n) {
  ClassCounts count{};
  for (size_t i = 0; i < n; ++i) ++count[classes[i]];
  return count;
}

// Where each class's elements start in the grouped order: classes in turn, elements in order.
ClassCounts StartsOf(ClassCounts counts) {
  uint32_t at = 0;
  for (uint32_t& c : counts) at += std::exchange(c, at);
  return counts;
}

void PutClassCounts(const ClassCounts& counts, uint8_t* out) {
  for (size_t c = 0; c < counts.size(); ++c) {
    for (int b = 0; b < 4; ++b) out[4 * c + b] = static_cast<uint8_t>(counts[c] >> (8 * b));
  }
}

// The counts an RKC4 chunk records, unless they cannot be its n elements' (DataLoss then).
std::optional<ClassCounts> GetClassCounts(const uint8_t* in, size_t n) {
  ClassCounts counts;
  uint64_t total = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    counts[c] = 0;
    for (int b = 0; b < 4; ++b) counts[c] |= uint32_t{in[4 * c + b]} << (8 * b);
    total += counts[c];
  }
  if (total != n) return std::nullopt;
  return counts;
}

// A thread's scratch, kept from chunk to chunk (a fresh buffer per 4 MiB chunk costs more in page
// faults than the work it holds) and never zeroed: a pull's chunks alternate between sizes (a
// tensor's last chunk is shorter), and a string or plain vector zero-filled up to 4 MiB a buffer
// a link as it grew back.
template <typename T>
T* ScratchOf(UninitializedVector<T>& buffer, size_t n) {
  buffer.resize(n);
  return buffer.data();
}

struct GroupScratch {
  uint8_t* classes;
  uint32_t *grouped, *residuals;  // grouped: 2n words (GroupedPlanes says why)
};
GroupScratch Scratch(size_t n) {
  thread_local UninitializedVector<uint8_t> classes;
  thread_local UninitializedVector<uint32_t> grouped, residuals;
  return {ScratchOf(classes, n), ScratchOf(grouped, 2 * n), ScratchOf(residuals, n)};
}

// Each element's residual against its prediction, or back: one kernel both ways, as the planes'
// (kForward: element i of `in` to residual word i of `out`; else residual word i of `in` to
// element i of `out`), four at a time where SSE2 is.
template <bool kForward, Op kOp>
void ResidualWords(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t n,
                   uint8_t* out) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) {
    const __m128i v = Load128(in + 4 * i), predicted = Predict4<kOp>(base, before, 4 * i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i),
                     kForward ? Forward4<kOp>(v, predicted) : Inverse4<kOp>(v, predicted));
  }
#endif
  for (; i < n; ++i) {
    const auto v = Load<uint32_t>(in, i);
    const auto predicted = Predict<uint32_t, kOp>(base, before, i);
    const uint32_t w =
        kForward ? Forward<uint32_t, kOp>(v, predicted) : Inverse<uint32_t, kOp>(v, predicted);
    std::memcpy(out + 4 * i, &w, 4);
  }
}

// A grouped delta's planes, both ways: to planes, the residuals in element order, moved to their
// classes' places, then regrouped by significance; from planes, the same undone in reverse. Only
// the move goes one element at a time: the other passes are vectorised. `counts`
// (kClassCountBytes, may be null): to planes, where the classes' counts go; from planes, the
// counts the encoder recorded, which spare counting them again (an eighth of a link's decode).
// False when recorded counts are not the classes' (a damaged chunk).
template <bool kToPlanes>
using CountsPointer = std::conditional_t<kToPlanes, uint8_t*, const uint8_t*>;
template <bool kToPlanes, Op kOp, ChunkGrouping kGrouping>
bool GroupedPlanes(const uint8_t* in, const uint8_t* base, const uint8_t* before, size_t n,
                   uint8_t* out, CountsPointer<kToPlanes> counts) {
  const GroupScratch s = Scratch(n);
  GroupClasses(base, kGrouping == ChunkGrouping::kByStep ? before : nullptr, n, s.classes);
  const uint8_t* __restrict classes = s.classes;
  uint32_t* __restrict words = s.residuals;
  uint32_t* __restrict grouped = s.grouped;
  if constexpr (kToPlanes) {
    const ClassCounts count = CountClasses(classes, n);
    if (counts != nullptr) PutClassCounts(count, counts);
    ClassCounts next = StartsOf(count);
    ResidualWords<true, kOp>(in, base, before, n, reinterpret_cast<uint8_t*>(words));
    for (size_t i = 0; i < n; ++i) grouped[next[classes[i]]++] = words[i];
    Planes<4, true, Op::kNone>(reinterpret_cast<const uint8_t*>(grouped), nullptr, nullptr, n, out);
    return true;
  } else {
    std::optional<ClassCounts> count =
        counts != nullptr ? GetClassCounts(counts, n) : CountClasses(classes, n);
    if (!count.has_value()) return false;
    const ClassCounts starts = StartsOf(*count);
    ClassCounts next = starts;
    Planes<4, false, Op::kNone>(in, nullptr, nullptr, n, reinterpret_cast<uint8_t*>(grouped));
    // Counts that are not the classes' make a class read past its part, at worst n words past
    // the end: Scratch keeps 2n words there.
    for (size_t i = 0; i < n; ++i) words[i] = grouped[next[classes[i]]++];
    if (counts != nullptr) {  // counted here, they hold by construction
      for (size_t c = 0; c < next.size(); ++c) {
        if (next[c] - starts[c] != (*count)[c]) return false;
      }
    }
    ResidualWords<false, kOp>(reinterpret_cast<const uint8_t*>(words), base, before, n, out);
    return true;
  }
}

template <bool kToPlanes>
using GroupedFn = bool (*)(const uint8_t*, const uint8_t*, const uint8_t*, size_t, uint8_t*,
                           CountsPointer<kToPlanes>);
template <bool kToPlanes, Op kOp>
GroupedFn<kToPlanes> GroupedPlanesFor(ChunkGrouping grouping) {
  return grouping == ChunkGrouping::kByStep
             ? GroupedPlanes<kToPlanes, kOp, ChunkGrouping::kByStep>
             : GroupedPlanes<kToPlanes, kOp, ChunkGrouping::kByExponent>;
}

// The kernel for a grouped chunk of `form` (four-byte differences or linear deltas, as
// ReadChunkHeader checks).
template <bool kToPlanes>
GroupedFn<kToPlanes> GroupedKernelFor(ChunkForm form, ChunkGrouping grouping) {
  return form == ChunkForm::kLinear ? GroupedPlanesFor<kToPlanes, Op::kLinear>(grouping)
                                    : GroupedPlanesFor<kToPlanes, Op::kDifference>(grouping);
}

// Bits the residuals of every 1024th element need under each prediction: a cheap stand-in for
// which form zstd will store smaller (a sample of every element would cost a pass over the
// chunk).
template <int W>
bool LinearLooksSmaller(const uint8_t* raw, const uint8_t* base, const uint8_t* before, size_t n) {
  using U = Element<W>;
  uint64_t difference_bits = 0, linear_bits = 0;
  const auto bits = [](U z) { return z == 0 ? 0 : 64 - __builtin_clzll(uint64_t{z}); };
  for (size_t i = 0; i < n; i += 1024) {
    const U r = Load<U>(raw, i);
    difference_bits +=
        bits(Forward<U, Op::kDifference>(r, Predict<U, Op::kDifference>(base, before, i)));
    linear_bits += bits(Forward<U, Op::kLinear>(r, Predict<U, Op::kLinear>(base, before, i)));
  }
  return linear_bits < difference_bits;
}

bool LinearLooksSmaller(int w, const uint8_t* raw, const uint8_t* base, const uint8_t* before,
                        size_t n) {
  switch (w) {
    case 1:
      return LinearLooksSmaller<1>(raw, base, before, n);
    case 2:
      return LinearLooksSmaller<2>(raw, base, before, n);
    case 4:
      return LinearLooksSmaller<4>(raw, base, before, n);
    default:
      return LinearLooksSmaller<8>(raw, base, before, n);
  }
}

const uint8_t* Bytes(std::string_view s) {
  return s.empty() ? nullptr : reinterpret_cast<const uint8_t*>(s.data());
}

std::string Prefix(std::string_view what) { return std::string(what) + ": "; }

// acc ^= link: sixteen bytes at a time where SSE2 is, else eight (memcpy keeps it free of
// aliasing and alignment rules).
void XorInto(char* a, const char* b, size_t n) {
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

size_t BodyOffset(ChunkForm form) { return kHeaderBytes + (IsDelta(form) ? kBaseHashBytes : 0); }

// The form a delta of `raw` against `base` takes.
Result<ChunkForm> DeltaForm(std::string_view raw, int width, const DeltaBase& base,
                            DeltaCoding coding) {
  const bool has_before = !base.before.empty();
  if (has_before && base.before.size() != raw.size()) {
    return InvalidArgumentError("delta base's base has " + std::to_string(base.before.size()) +
                                " bytes, the chunk " + std::to_string(raw.size()));
  }
  switch (coding) {
    case DeltaCoding::kXorDelta:
      return ChunkForm::kXorDelta;
    case DeltaCoding::kDifference:
      return ChunkForm::kDifference;
    case DeltaCoding::kLinear:
      if (!has_before) return InvalidArgumentError("a linear delta needs the base's base");
      return ChunkForm::kLinear;
    case DeltaCoding::kAuto:
      break;
  }
  return has_before && LinearLooksSmaller(width, Bytes(raw), Bytes(base.raw), Bytes(base.before),
                                          raw.size() / width)
             ? ChunkForm::kLinear
             : ChunkForm::kDifference;
}

// How a delta of `width`-byte elements groups its residuals: kAuto groups four-byte ones.
ChunkGrouping DeltaGrouping(int width, const DeltaBase& base, DeltaCoding coding) {
  if (coding != DeltaCoding::kAuto || width != 4) return ChunkGrouping::kNone;
  return base.before.empty() ? ChunkGrouping::kByExponent : ChunkGrouping::kByStep;
}

// The planes a chunk of `form` and `grouping` compresses; a grouped one's class counts first
// into `counts` (kClassCountBytes) where it is given.
void ToPlanes(ChunkForm form, ChunkGrouping grouping, std::string_view raw, int width,
              const DeltaBase* base, char* planes, char* counts) {
  const uint8_t* base_bytes = base != nullptr ? Bytes(base->raw) : nullptr;
  const uint8_t* before = base != nullptr ? Bytes(base->before) : nullptr;
  auto* out = reinterpret_cast<uint8_t*>(planes);
  if (grouping == ChunkGrouping::kNone) {
    PlanesFor<true>(width, form)(Bytes(raw), base_bytes, before, raw.size() / width, out);
    return;
  }
  GroupedKernelFor<true>(form, grouping)(Bytes(raw), base_bytes, before, raw.size() / width, out,
                                         reinterpret_cast<uint8_t*>(counts));
}

// The bytes a chunk's zstd frame holds: its planes, after an RKC4 chunk's class counts.
uint64_t FrameBytes(const ChunkHeader& h) {
  return h.raw_size + (h.class_counts ? kClassCountBytes : 0);
}

// A delta link's raw bytes into out[0, size) from its decompressed frame (FrameBytes), given
// the bytes of the link before it (`base`) and, where the link needs it, of the one before that.
// DataLoss when its recorded class counts are not its base's.
Status FromDeltaPlanes(const ChunkHeader& h, const char* frame, const char* base,
                       const char* before, char* out, std::string_view what) {
  const auto* base_bytes = reinterpret_cast<const uint8_t*>(base);
  const auto* before_bytes = reinterpret_cast<const uint8_t*>(before);
  const size_t n = h.raw_size / h.element_width;
  auto* out_bytes = reinterpret_cast<uint8_t*>(out);
  if (h.grouping == ChunkGrouping::kNone) {
    PlanesFor<false>(h.element_width, h.form)(reinterpret_cast<const uint8_t*>(frame), base_bytes,
                                              before_bytes, n, out_bytes);
    return Status::Ok();
  }
  const auto* counts = h.class_counts ? reinterpret_cast<const uint8_t*>(frame) : nullptr;
  const auto* planes = reinterpret_cast<const uint8_t*>(frame + FrameBytes(h) - h.raw_size);
  if (!GroupedKernelFor<false>(h.form, h.grouping)(planes, base_bytes, before_bytes, n, out_bytes,
                                                   counts)) {
    return DataLossError(Prefix(what) + "chunk's class counts are not its base's");
  }
  return Status::Ok();
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

namespace {

Status CheckEncodeArguments(std::string_view raw, int element_width, const DeltaBase* delta_base,
                            const ChunkEncodeOptions& options) {
  if (!ValidWidth(element_width)) {
    return InvalidArgumentError("chunk element width " + std::to_string(element_width) +
                                " is not 1, 2, 4 or 8");
  }
  if (raw.size() % element_width != 0) {
    return InvalidArgumentError("chunk of " + std::to_string(raw.size()) +
                                " bytes is not whole elements of " + std::to_string(element_width));
  }
  if (delta_base == nullptr) return Status::Ok();
  if (delta_base->raw.size() != raw.size()) {
    return InvalidArgumentError("delta base has " + std::to_string(delta_base->raw.size()) +
                                " bytes, the chunk " + std::to_string(raw.size()));
  }
  if (delta_base->depth < 0 || delta_base->depth >= kMaxChunkDepth) {
    return InvalidArgumentError("delta base depth " + std::to_string(delta_base->depth) +
                                " is outside [0, " + std::to_string(kMaxChunkDepth) + ")");
  }
  if (!options.compress) {
    return InvalidArgumentError(
        "a delta chunk needs compression: zstd of the residual is its point");
  }
  if (!delta_base->before.empty() && delta_base->depth == 0) {
    return InvalidArgumentError("a delta base of depth 0 is whole: it has no base of its own");
  }
  return Status::Ok();
}

// The difference forms carry their own magic, so that builds before them refuse them; so do
// grouped ones, and those with their class counts.
std::string_view MagicOf(ChunkForm form, ChunkGrouping grouping, bool class_counts) {
  if (grouping != ChunkGrouping::kNone) return class_counts ? kMagicCounted : kMagicGrouped;
  return form == ChunkForm::kDifference || form == ChunkForm::kLinear ? kMagicDifference : kMagic;
}

// The fixed 16 bytes every chunk starts with.
std::string HeaderBytes(ChunkForm form, ChunkGrouping grouping, bool class_counts,
                        int element_width, int depth, uint64_t raw_size) {
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), MagicOf(form, grouping, class_counts).data(), kMagic.size());
  out[4] = static_cast<char>(static_cast<uint8_t>(form) | static_cast<uint8_t>(grouping) << 6);
  out[5] = static_cast<char>(element_width);
  out[6] = static_cast<char>(depth & 0xff);
  out[7] = static_cast<char>(depth >> 8);
  PutU64(out.data() + 8, raw_size);
  return out;
}

// The 32 bytes of a delta's base address: hashed from its bytes unless the caller knows it.
Result<std::string> BaseAddress(const DeltaBase& base) {
  if (base.sha256.empty()) return Sha256Raw(base.raw);
  std::optional<std::string> address = HexDecode(base.sha256);
  if (!address.has_value() || address->size() != kBaseHashBytes) {
    return InvalidArgumentError("delta base address '" + std::string(base.sha256) +
                                "' is not a SHA-256");
  }
  return std::move(*address);
}

}  // namespace

Result<std::string> EncodeChunk(std::string_view raw, int element_width,
                                const DeltaBase* delta_base, const ChunkEncodeOptions& options) {
  REEL_RETURN_IF_ERROR(CheckEncodeArguments(raw, element_width, delta_base, options));
  ChunkForm form = options.compress ? ChunkForm::kFull : ChunkForm::kStored;
  ChunkGrouping grouping = ChunkGrouping::kNone;
  if (delta_base != nullptr) {
    REEL_ASSIGN_OR_RETURN(form, DeltaForm(raw, element_width, *delta_base, options.coding));
    grouping = DeltaGrouping(element_width, *delta_base, options.coding);
  }
  const int depth = delta_base != nullptr ? delta_base->depth + 1 : 0;
  const bool class_counts = grouping != ChunkGrouping::kNone && options.record_class_counts;
  std::string out = HeaderBytes(form, grouping, class_counts, element_width, depth, raw.size());
  if (form == ChunkForm::kStored) {
    out += raw;
    return out;
  }
  if (delta_base != nullptr) {
    REEL_ASSIGN_OR_RETURN(std::string address, BaseAddress(*delta_base));
    out += address;
  }
  // The frame's bytes: an RKC4 chunk's class counts, then the planes.
  const size_t counts_bytes = class_counts ? kClassCountBytes : 0;
  thread_local UninitializedVector<char> scratch;
  char* frame = ScratchOf(scratch, counts_bytes + raw.size());
  ToPlanes(form, grouping, raw, element_width, delta_base, frame + counts_bytes,
           class_counts ? frame : nullptr);
  // A small match-finder table: the planes are mostly noise, where zstd's matches cost more than
  // they save (R(2+1)D-18: 0.2-0.4 points of the file smaller for a delta, 0.9 for a whole chunk,
  // and no slower).
  constexpr int kPlanesHashLog = 6;
  REEL_RETURN_IF_ERROR(ZstdCompressAppend(std::string_view(frame, counts_bytes + raw.size()),
                                          ZstdOptions{options.zstd_level, kPlanesHashLog}, &out));
  return out;
}

Result<std::string> StoredChunkHeader(std::string_view raw, int element_width) {
  ChunkEncodeOptions stored;
  stored.compress = false;
  REEL_RETURN_IF_ERROR(CheckEncodeArguments(raw, element_width, nullptr, stored));
  return HeaderBytes(ChunkForm::kStored, ChunkGrouping::kNone, /*class_counts=*/false,
                     element_width, /*depth=*/0, raw.size());
}

Result<ChunkHeader> ReadChunkHeader(std::string_view encoded, std::string_view what) {
  if (encoded.size() < kHeaderBytes || encoded.substr(0, 3) != kMagic.substr(0, 3)) {
    return DataLossError(Prefix(what) + "not a registry chunk (bad magic or truncated header)");
  }
  const std::string_view magic = encoded.substr(0, 4);
  if (magic != kMagic && magic != kMagicDifference && magic != kMagicGrouped &&
      magic != kMagicCounted) {
    return FailedPreconditionError(Prefix(what) + "chunk format '" + std::string(magic) +
                                   "' is newer than this build reads ('RKC1' to 'RKC4')");
  }
  ChunkHeader h;
  const auto form = static_cast<uint8_t>(encoded[4] & kFormBits);
  const auto grouping = static_cast<uint8_t>(static_cast<uint8_t>(encoded[4]) >> 6);
  if (form > 4 || grouping > 2) {
    return DataLossError(Prefix(what) + "unknown chunk form " +
                         std::to_string(static_cast<uint8_t>(encoded[4])));
  }
  h.form = static_cast<ChunkForm>(form);
  h.grouping = static_cast<ChunkGrouping>(grouping);
  h.element_width = static_cast<uint8_t>(encoded[5]);
  h.depth = static_cast<uint8_t>(encoded[6]) | static_cast<uint8_t>(encoded[7]) << 8;
  h.class_counts = magic == kMagicCounted;
  const bool grouped_ok =
      h.grouping == ChunkGrouping::kNone ||
      (h.element_width == 4 && (h.form == ChunkForm::kDifference || h.form == ChunkForm::kLinear));
  if (!ValidWidth(h.element_width) || IsDelta(h.form) != (h.depth > 0) || !grouped_ok ||
      magic != MagicOf(h.form, h.grouping, h.class_counts) || (NeedsBaseBefore(h) && h.depth < 2)) {
    return DataLossError(Prefix(what) + "corrupt chunk header");
  }
  h.raw_size = GetU64(encoded.data() + 8);
  if (h.raw_size % h.element_width != 0) {
    return DataLossError(Prefix(what) + "chunk size " + std::to_string(h.raw_size) +
                         " is not whole elements of " + std::to_string(h.element_width));
  }
  if (IsDelta(h.form)) {
    if (encoded.size() < kHeaderBytes + kBaseHashBytes) {
      return DataLossError(Prefix(what) + "truncated delta chunk header");
    }
    h.base_sha256 = HexEncode(encoded.substr(kHeaderBytes, kBaseHashBytes));
  }
  return h;
}

Result<std::string> DecodeChunk(std::string_view encoded, std::string_view base,
                                std::string_view what, std::string_view before) {
  REEL_ASSIGN_OR_RETURN(ChunkHeader h, ReadChunkHeader(encoded, what));
  const bool delta = IsDelta(h.form), needs_before = NeedsBaseBefore(h);
  if (delta && base.size() != h.raw_size) {
    return InvalidArgumentError(Prefix(what) + "delta chunk of " + std::to_string(h.raw_size) +
                                " bytes given a base of " + std::to_string(base.size()));
  }
  if (needs_before && before.size() != h.raw_size) {
    return InvalidArgumentError(Prefix(what) + "delta chunk of " + std::to_string(h.raw_size) +
                                " bytes given a base's base of " + std::to_string(before.size()));
  }
  if ((!delta && !base.empty()) || (!needs_before && !before.empty())) {
    return InvalidArgumentError(Prefix(what) + "a base given to a chunk that takes none");
  }
  if (h.form == ChunkForm::kStored) return StoredBytes(encoded, h, what);
  REEL_ASSIGN_OR_RETURN(std::string frame,
                        ZstdDecompress(encoded.substr(BodyOffset(h.form)), FrameBytes(h), what));
  if (frame.size() != FrameBytes(h)) {
    return DataLossError(Prefix(what) + "chunk holds " + std::to_string(frame.size()) +
                         " bytes, its header says " + std::to_string(FrameBytes(h)));
  }
  std::string raw(h.raw_size, '\0');
  if (delta) {
    REEL_RETURN_IF_ERROR(
        FromDeltaPlanes(h, frame.data(), base.data(), before.data(), raw.data(), what));
  } else {
    PlanesFor<false>(h.element_width, ChunkForm::kFull)(Bytes(frame), nullptr, nullptr,
                                                        h.raw_size / h.element_width,
                                                        reinterpret_cast<uint8_t*>(raw.data()));
  }
  return raw;
}

namespace {

// The headers of a chain's links, checked to be one full chunk of `size` bytes and then deltas of
// the same size and width.
Result<std::vector<ChunkHeader>> ChainHeaders(const std::vector<std::string_view>& chain,
                                              std::string_view what, size_t size) {
  std::vector<ChunkHeader> headers;
  headers.reserve(chain.size());
  for (size_t k = 0; k < chain.size(); ++k) {
    REEL_ASSIGN_OR_RETURN(ChunkHeader h, ReadChunkHeader(chain[k], what));
    if (k == 0 && IsDelta(h.form)) {
      return DataLossError(Prefix(what) + "a chunk chain that does not start with a whole chunk");
    }
    if (k == 0 && h.raw_size != size) {
      return DataLossError(Prefix(what) + "chunk of " + std::to_string(h.raw_size) +
                           " bytes where " + std::to_string(size) + " were expected");
    }
    if (k > 0 &&
        (!IsDelta(h.form) || h.raw_size != size || h.element_width != headers[0].element_width)) {
      return DataLossError(Prefix(what) + "link " + std::to_string(k) +
                           " of its chunk chain is not a delta of the same size and width");
    }
    if (k == 1 && NeedsBaseBefore(h)) {
      return DataLossError(
          Prefix(what) + "a delta that needs its base's base right after its chain's whole chunk");
    }
    headers.push_back(std::move(h));
  }
  return headers;
}

// The first link's raw bytes into out[0, size).
Status DecodeWhole(std::string_view encoded, const ChunkHeader& h, std::string_view what, char* out,
                   ZstdChecksum checksum) {
  if (h.form == ChunkForm::kStored) {
    REEL_ASSIGN_OR_RETURN(std::string_view body, StoredBody(encoded, h, what));
    std::memcpy(out, body.data(), body.size());
    return Status::Ok();
  }
  thread_local UninitializedVector<char> scratch;
  char* planes = ScratchOf(scratch, h.raw_size);
  REEL_RETURN_IF_ERROR(
      ZstdDecompressInto(encoded.substr(BodyOffset(h.form)), planes, h.raw_size, what, checksum));
  PlanesFor<false>(h.element_width, ChunkForm::kFull)(
      reinterpret_cast<const uint8_t*>(planes), nullptr, nullptr, h.raw_size / h.element_width,
      reinterpret_cast<uint8_t*>(out));
  return Status::Ok();
}

// A chain of XOR deltas at once: the XOR of every link's planes, regrouped once.
Status DecodeXorChain(const std::vector<std::string_view>& chain,
                      const std::vector<ChunkHeader>& headers, std::string_view what, char* out,
                      size_t size, ZstdChecksum checksum) {
  thread_local UninitializedVector<char> planes_scratch, link_scratch;
  char* planes = ScratchOf(planes_scratch, size);
  char* link = ScratchOf(link_scratch, size);
  const ChunkHeader& first = headers[0];
  if (first.form == ChunkForm::kStored) {
    REEL_ASSIGN_OR_RETURN(std::string_view body, StoredBody(chain.front(), first, what));
    PlanesFor<true>(first.element_width, ChunkForm::kFull)(Bytes(body), nullptr, nullptr,
                                                           size / first.element_width,
                                                           reinterpret_cast<uint8_t*>(planes));
  } else {
    REEL_RETURN_IF_ERROR(ZstdDecompressInto(chain.front().substr(BodyOffset(first.form)), planes,
                                            size, what, checksum));
  }
  for (size_t k = 1; k < chain.size(); ++k) {
    REEL_RETURN_IF_ERROR(ZstdDecompressInto(chain[k].substr(BodyOffset(headers[k].form)), link,
                                            size, what, checksum));
    XorInto(planes, link, size);
  }
  PlanesFor<false>(first.element_width, ChunkForm::kFull)(
      reinterpret_cast<const uint8_t*>(planes), nullptr, nullptr, size / first.element_width,
      reinterpret_cast<uint8_t*>(out));
  return Status::Ok();
}

// Link by link, each into the next of three rotating buffers (the last into `out`), so that a
// link's base and the base's base are both at hand.
Status DecodeLinkByLink(const std::vector<std::string_view>& chain,
                        const std::vector<ChunkHeader>& headers, std::string_view what, char* out,
                        size_t size, char* before, ZstdChecksum checksum) {
  thread_local UninitializedVector<char> links[3], frame_scratch;
  const size_t last = chain.size() - 1;  // at least 1 here
  // The same size every call of one chain: no link's buffer moves while the chain decodes.
  const auto target = [&](size_t k) { return k == last ? out : ScratchOf(links[k % 3], size); };
  char* frame = ScratchOf(frame_scratch, size + kClassCountBytes);
  const char* previous = target(0);
  REEL_RETURN_IF_ERROR(DecodeWhole(chain[0], headers[0], what, target(0), checksum));
  const char* previous2 = nullptr;
  for (size_t k = 1; k <= last; ++k) {
    REEL_RETURN_IF_ERROR(ZstdDecompressInto(chain[k].substr(BodyOffset(headers[k].form)), frame,
                                            FrameBytes(headers[k]), what, checksum));
    char* into = target(k);
    REEL_RETURN_IF_ERROR(FromDeltaPlanes(headers[k], frame, previous, previous2, into, what));
    previous2 = previous;
    previous = into;
  }
  if (before != nullptr && previous2 != nullptr) std::memcpy(before, previous2, size);
  return Status::Ok();
}

}  // namespace

Status DecodeChainInto(const std::vector<std::string_view>& chain, std::string_view what, char* out,
                       size_t size, char* before, ZstdChecksum checksum) {
  if (chain.empty()) return InvalidArgumentError(Prefix(what) + "an empty chunk chain");
  REEL_ASSIGN_OR_RETURN(const std::vector<ChunkHeader> headers, ChainHeaders(chain, what, size));
  const bool all_xor = std::all_of(headers.begin() + 1, headers.end(), [](const ChunkHeader& h) {
    return h.form == ChunkForm::kXorDelta;
  });
  if (chain.size() == 1) return DecodeWhole(chain[0], headers[0], what, out, checksum);
  if (all_xor && before == nullptr)
    return DecodeXorChain(chain, headers, what, out, size, checksum);
  return DecodeLinkByLink(chain, headers, what, out, size, before, checksum);
}

Result<std::string> DecodeChain(const std::vector<std::string_view>& chain, std::string_view what) {
  if (chain.empty()) return InvalidArgumentError(Prefix(what) + "an empty chunk chain");
  REEL_ASSIGN_OR_RETURN(const ChunkHeader first, ReadChunkHeader(chain.front(), what));
  std::string raw(first.raw_size, '\0');
  REEL_RETURN_IF_ERROR(DecodeChainInto(chain, what, raw.data(), raw.size()));
  return raw;
}

}  // namespace reel::registry
