#include "loader/resample.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define REEL_RESAMPLE_AVX2 1
#endif

namespace reel::loader::internal {
namespace {

// Along x, values [from, to) of one source row into 3 planes of n floats.
void AlongXScalar(const uint8_t* row, const std::vector<Tap>& xs, int from, int to, int n,
                  float* out) {
  for (int ch = 0; ch < 3; ++ch) {
    float* plane = out + static_cast<std::ptrdiff_t>(ch) * n;
    for (int x = from; x < to; ++x) {
      const Tap& t = xs[static_cast<size_t>(x)];
      const int a = t.i0 * 3 + ch, b = t.i1 * 3 + ch;
      plane[x] = row[a] + (row[b] - row[a]) * t.w1;
    }
  }
}

// Along y, values [from, n) of one output row from its two x-resampled source rows.
void AlongYScalar(const float* top, const float* bottom, float wy, int from, int n, int y,
                  const PlaneOut& out) {
  for (int ch = 0; ch < 3; ++ch) {
    const float* t = top + static_cast<std::ptrdiff_t>(ch) * n;
    const float* b = bottom + static_cast<std::ptrdiff_t>(ch) * n;
    const size_t at = static_cast<size_t>(y) * n;
    for (int x = from; x < n; ++x) {
      const float v = t[x] + (b[x] - t[x]) * wy;
      if (out.f32[ch] != nullptr) {
        out.f32[ch][at + x] = v * out.scale[ch] + out.bias[ch];
      } else {
        // +0.5 and truncation round half up, faster than lround.
        // NOLINTNEXTLINE(bugprone-incorrect-roundings)
        out.u8[ch][at + x] = static_cast<uint8_t>(std::min(255.f, std::max(0.f, v)) + 0.5f);
      }
    }
  }
}

#ifdef REEL_RESAMPLE_AVX2
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// An RGB row's first width / 16 * 16 pixels into three byte planes, 16 pixels (48 bytes) a step:
// three byte shuffles per plane pick its bytes out of the three 16-byte loads.
__attribute__((target("avx2"))) int Deinterleave(const uint8_t* row, int width,
                                                 const std::array<uint8_t*, 3>& planes) {
  constexpr int8_t z = -1;  // a shuffle index that writes 0
  const __m128i pick[3][3] = {{_mm_setr_epi8(0, 3, 6, 9, 12, 15, z, z, z, z, z, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, z, 2, 5, 8, 11, 14, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 1, 4, 7, 10, 13)},
                              {_mm_setr_epi8(1, 4, 7, 10, 13, z, z, z, z, z, z, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, 0, 3, 6, 9, 12, 15, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 2, 5, 8, 11, 14)},
                              {_mm_setr_epi8(2, 5, 8, 11, 14, z, z, z, z, z, z, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, 1, 4, 7, 10, 13, z, z, z, z, z, z),
                               _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, 0, 3, 6, 9, 12, 15)}};
  const int whole = width / 16 * 16;
  for (int x = 0; x < whole; x += 16) {
    const auto* p = reinterpret_cast<const __m128i*>(row + static_cast<size_t>(x) * 3);
    const __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1), c = _mm_loadu_si128(p + 2);
    for (size_t ch = 0; ch < 3; ++ch) {
      const __m128i v = _mm_or_si128(
          _mm_or_si128(_mm_shuffle_epi8(a, pick[ch][0]), _mm_shuffle_epi8(b, pick[ch][1])),
          _mm_shuffle_epi8(c, pick[ch][2]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(planes[ch] + x), v);
    }
  }
  return whole;
}

// AlongXScalar, 8 values a step, for the blocks whose taps lie within 16 source pixels of the
// block's first: one byte shuffle of those 16 pixels gives the 8 left neighbours and the 8 right
// ones. Other blocks (a crop shrunk more than about 2x) take the scalar path.
__attribute__((target("avx2"))) void AlongXAvx2(const uint8_t* row, int width,
                                                const XBlocks& blocks, const std::vector<Tap>& xs,
                                                int n, const std::array<uint8_t*, 3>& planes,
                                                float* out) {
  for (int x = Deinterleave(row, width, planes); x < width; ++x) {
    for (size_t ch = 0; ch < 3; ++ch) planes[ch][x] = row[static_cast<size_t>(x) * 3 + ch];
  }
  const int whole = n / 8 * 8;
  for (int x = 0; x < whole; x += 8) {
    const auto j = static_cast<size_t>(x / 8);
    const int base = blocks.base[j];
    if (base < 0) {
      AlongXScalar(row, xs, x, x + 8, n, out);
      continue;
    }
    const __m128i pick = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks.index.data()) + j);
    const __m256 w1 = _mm256_loadu_ps(&blocks.w1[static_cast<size_t>(x)]);
    for (size_t ch = 0; ch < 3; ++ch) {
      const __m128i window = _mm_loadu_si128(reinterpret_cast<const __m128i*>(planes[ch] + base));
      const __m128i picked = _mm_shuffle_epi8(window, pick);  // 8 left, then 8 right
      const __m256i a = _mm256_cvtepu8_epi32(picked);
      const __m256i b = _mm256_cvtepu8_epi32(_mm_srli_si128(picked, 8));
      const __m256 diff = _mm256_cvtepi32_ps(_mm256_sub_epi32(b, a));
      _mm256_storeu_ps(out + ch * static_cast<size_t>(n) + x,
                       _mm256_add_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(diff, w1)));
    }
  }
  AlongXScalar(row, xs, whole, n, n, out);
}

// 8 rounded values in [0, 255] to 8 bytes at `out`.
__attribute__((target("avx2"))) void StoreBytes(__m256 v, uint8_t* out) {
  const __m256 clamped =
      _mm256_min_ps(_mm256_set1_ps(255.f), _mm256_max_ps(_mm256_setzero_ps(), v));
  const __m256i rounded = _mm256_cvttps_epi32(_mm256_add_ps(clamped, _mm256_set1_ps(0.5f)));
  const __m256i words = _mm256_packus_epi32(rounded, rounded);  // per 128-bit lane
  const __m256i bytes = _mm256_packus_epi16(words, words);
  const int lo = _mm256_extract_epi32(bytes, 0), hi = _mm256_extract_epi32(bytes, 4);
  std::memcpy(out, &lo, 4);
  std::memcpy(out + 4, &hi, 4);
}

__attribute__((target("avx2"))) int AlongYAvx2(const float* top, const float* bottom, float wy,
                                               int n, int y, const PlaneOut& out) {
  const int whole = n / 8 * 8;
  const __m256 vwy = _mm256_set1_ps(wy);
  const size_t at = static_cast<size_t>(y) * n;
  for (size_t ch = 0; ch < 3; ++ch) {
    const float* t = top + ch * n;
    const float* b = bottom + ch * n;
    const __m256 scale = _mm256_set1_ps(out.scale[ch]), bias = _mm256_set1_ps(out.bias[ch]);
    for (int x = 0; x < whole; x += 8) {
      const __m256 vt = _mm256_loadu_ps(t + x);
      const __m256 v =
          _mm256_add_ps(vt, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(b + x), vt), vwy));
      if (out.f32[ch] != nullptr) {
        _mm256_storeu_ps(out.f32[ch] + at + x, _mm256_add_ps(_mm256_mul_ps(v, scale), bias));
      } else {
        StoreBytes(v, out.u8[ch] + at + x);
      }
    }
  }
  return whole;
}
#endif

}  // namespace

std::vector<Tap> AxisTaps(double origin, double extent, int limit, int n, bool mirror) {
  std::vector<Tap> v(static_cast<size_t>(n));
  for (int o = 0; o < n; ++o) {
    const int oo = mirror ? n - 1 - o : o;
    double src = origin + (oo + 0.5) * extent / n - 0.5;
    src = std::clamp(src, 0.0, static_cast<double>(limit - 1));
    const int i0 = static_cast<int>(std::floor(src));
    const int i1 = std::min(i0 + 1, limit - 1);
    v[static_cast<size_t>(o)] = {i0, i1, static_cast<float>(src - i0)};
  }
  return v;
}

FrameResampler::FrameResampler(int width, std::vector<Tap> xs, std::vector<Tap> ys, bool vector)
    : width_(width), n_(static_cast<int>(xs.size())), xs_(std::move(xs)), ys_(std::move(ys)) {
#ifdef REEL_RESAMPLE_AVX2
  vector_ = vector && HasAvx2();
#else
  (void)vector;
#endif
  if (vector_) PlanBlocks();
  for (auto& c : cached_) c.resize(3 * static_cast<size_t>(n_));
}

void FrameResampler::PlanBlocks() {
  // A block's left neighbours lie at base + index (0..14), its right ones one pixel on; a tap
  // clamped at the right edge (i0 == i1, weight 0) becomes the pair to its left with weight 1:
  // the same value, exactly.
  for (int x = 0; x + 8 <= n_; x += 8) {
    int lowest = width_, highest = 0;
    std::array<int, 8> left{};
    for (int k = 0; k < 8; ++k) {
      const Tap& t = xs_[static_cast<size_t>(x) + static_cast<size_t>(k)];
      const bool clamped = t.i1 == t.i0 && t.i0 > 0;
      left[static_cast<size_t>(k)] = clamped ? t.i0 - 1 : t.i0;
      blocks_.w1.push_back(clamped ? 1.f : t.w1);
      lowest = std::min(lowest, left[static_cast<size_t>(k)]);
      highest = std::max(highest, left[static_cast<size_t>(k)]);
    }
    const bool fits = highest + 1 - lowest < 16 && width_ >= 2;
    blocks_.base.push_back(fits ? lowest : -1);
    for (int side = 0; side < 2; ++side) {
      for (int k = 0; k < 8; ++k) {
        const int index = fits ? left[static_cast<size_t>(k)] + side - lowest : 0;
        blocks_.index.push_back(static_cast<uint8_t>(index));
      }
    }
  }
  // Each plane holds a row and the 16 bytes a block past its end may load.
  for (auto& plane : planes_) plane.assign(static_cast<size_t>(width_) + 16, 0);
}

const float* FrameResampler::AlongX(const uint8_t* pixels, int row, int keep) {
  for (size_t k = 0; k < 2; ++k) {
    if (cached_row_[k] == row) return cached_[k].data();
  }
  const size_t k = cached_row_[0] == keep ? 1 : 0;  // the row the caller still needs stays
  const uint8_t* src = pixels + static_cast<size_t>(row) * width_ * 3;
#ifdef REEL_RESAMPLE_AVX2
  if (vector_) {
    AlongXAvx2(src, width_, blocks_, xs_, n_,
               {planes_[0].data(), planes_[1].data(), planes_[2].data()}, cached_[k].data());
  }
#endif
  if (!vector_) AlongXScalar(src, xs_, 0, n_, n_, cached_[k].data());
  cached_row_[k] = row;
  return cached_[k].data();
}

void FrameResampler::Resample(const uint8_t* pixels, const PlaneOut& out) {
  cached_row_ = {-1, -1};  // a new frame
  for (int y = 0; y < n_; ++y) {
    const Tap& t = ys_[static_cast<size_t>(y)];
    const float* top = AlongX(pixels, t.i0, t.i1);
    const float* bottom = AlongX(pixels, t.i1, t.i0);
    int done = 0;
#ifdef REEL_RESAMPLE_AVX2
    if (vector_) done = AlongYAvx2(top, bottom, t.w1, n_, y, out);
#endif
    AlongYScalar(top, bottom, t.w1, done, n_, y, out);
  }
}

}  // namespace reel::loader::internal
