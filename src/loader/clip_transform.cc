#include "loader/clip_transform.h"

#include <algorithm>
#include <cmath>

namespace reel::loader {
namespace {

struct Box {
  double x, y, w, h;  // in source pixels
};

// torchvision's RandomResizedCrop: up to 10 tries at a random area and log-uniform ratio, then
// the centre crop of the allowed ratio.
Box RandomResizedBox(int width, int height, const TransformOptions& t, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * rng.Uniform(t.min_scale, t.max_scale);
    double ratio = std::exp(rng.Uniform(std::log(t.min_ratio), std::log(t.max_ratio)));
    double w = std::sqrt(target * ratio), h = std::sqrt(target / ratio);
    if (w <= width && h <= height && w >= 1 && h >= 1) {
      return {rng.Uniform(0, width - w), rng.Uniform(0, height - h), w, h};
    }
  }
  double ratio = static_cast<double>(width) / height;
  double w = width, h = height;
  if (ratio < t.min_ratio) h = w / t.min_ratio;
  if (ratio > t.max_ratio) w = h * t.max_ratio;
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// Resize the short side to `size`, then take the centre size x size square.
Box CentreBox(int width, int height, int size) {
  double scale = static_cast<double>(size) / std::min(width, height);
  double w = size / scale, h = size / scale;
  return {(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace

Result<std::vector<int>> ClipStarts(int stored, const ClipOptions& clip, Rng& rng) {
  if (clip.frames < 1 || clip.stride < 1 || clip.clips_per_video < 1) {
    return InvalidArgumentError("clip frames, stride and clips_per_video must be at least 1");
  }
  if (stored < 1) return InvalidArgumentError("a clip needs at least one stored frame");
  const int span = (clip.frames - 1) * clip.stride + 1;
  const int room = std::max(0, stored - span);  // last valid start
  std::vector<int> starts;
  if (clip.clips_per_video > 1) {
    for (int i = 0; i < clip.clips_per_video; ++i) {
      starts.push_back(static_cast<int>(
          std::lround(static_cast<double>(i) * room / (clip.clips_per_video - 1))));
    }
    return starts;
  }
  switch (clip.sampling) {
    case ClipSampling::kRandom:
      starts.push_back(static_cast<int>(rng.Below(static_cast<uint64_t>(room) + 1)));
      break;
    case ClipSampling::kCenter:
    case ClipSampling::kUniform:
      starts.push_back(room / 2);
      break;
  }
  return starts;
}

Flips DrawFlips(const TransformOptions& t, Rng& rng) {
  Flips flips;
  // Only the enabled ones draw, so turning one on leaves the other's stream as it was.
  if (t.train && t.flip) flips.mirror = rng() & 1;
  if (t.train && t.reverse) flips.reverse = rng() & 1;
  return flips;
}

Status MakeClip(const FrameStack& s, int start, const ClipOptions& clip, const TransformOptions& t,
                Flips flips, Rng& rng, std::vector<float>* out_f32, std::vector<uint8_t>* out_u8) {
  if (s.c != 3 || s.t < 1 || s.h < 1 || s.w < 1 ||
      s.pixels.size() != static_cast<size_t>(s.t) * s.h * s.w * s.c) {
    return InvalidArgumentError("frame stack is not T x H x W x 3 uint8");
  }
  if (t.size < 1) return InvalidArgumentError("transform size must be positive");
  // The same crop and flip for every frame of the clip: motion stays consistent.
  Box box = t.train ? RandomResizedBox(s.w, s.h, t, rng) : CentreBox(s.w, s.h, t.size);
  const int n = t.size;
  const size_t plane = static_cast<size_t>(n) * n;
  const size_t total = 3 * static_cast<size_t>(clip.frames) * plane;
  const size_t base = t.normalize ? out_f32->size() : out_u8->size();
  if (t.normalize)
    out_f32->resize(base + total);
  else
    out_u8->resize(base + total);

  // Bilinear sampling at pixel centres (align_corners = false), precomputed per axis.
  struct Tap {
    int i0, i1;
    float w1;
  };
  auto taps = [&](double origin, double extent, int limit, bool mirror) {
    std::vector<Tap> v(static_cast<size_t>(n));
    for (int o = 0; o < n; ++o) {
      int oo = mirror ? n - 1 - o : o;
      double src = origin + (oo + 0.5) * extent / n - 0.5;
      src = std::clamp(src, 0.0, static_cast<double>(limit - 1));
      int i0 = static_cast<int>(std::floor(src));
      int i1 = std::min(i0 + 1, limit - 1);
      v[static_cast<size_t>(o)] = {i0, i1, static_cast<float>(src - i0)};
    }
    return v;
  };
  const auto xs = taps(box.x, box.w, s.w, flips.mirror);
  const auto ys = taps(box.y, box.h, s.h, false);

  // Per channel: x / 255 then (x - mean) / std, folded into one multiply-add.
  float scale[3], bias[3];
  for (int ch = 0; ch < 3; ++ch) {
    scale[ch] = 1.f / (255.f * t.std[static_cast<size_t>(ch)]);
    bias[ch] = -t.mean[static_cast<size_t>(ch)] / t.std[static_cast<size_t>(ch)];
  }
  const size_t channel_stride = static_cast<size_t>(clip.frames) * plane;
  for (int f = 0; f < clip.frames; ++f) {
    const int played = flips.reverse ? clip.frames - 1 - f : f;
    const int frame = std::min(start + played * clip.stride, s.t - 1);
    const uint8_t* src = reinterpret_cast<const uint8_t*>(s.pixels.data()) +
                         static_cast<size_t>(frame) * s.h * s.w * 3;
    for (int y = 0; y < n; ++y) {
      const Tap& ty = ys[static_cast<size_t>(y)];
      const uint8_t* r0 = src + static_cast<size_t>(ty.i0) * s.w * 3;
      const uint8_t* r1 = src + static_cast<size_t>(ty.i1) * s.w * 3;
      const size_t row = static_cast<size_t>(f) * plane + static_cast<size_t>(y) * n;
      // Channel outermost so that each output row is written contiguously.
      for (int ch = 0; ch < 3; ++ch) {
        float* out_f = t.normalize ? out_f32->data() + base + ch * channel_stride + row : nullptr;
        uint8_t* out_b = t.normalize ? nullptr : out_u8->data() + base + ch * channel_stride + row;
        for (int x = 0; x < n; ++x) {
          const Tap& tx = xs[static_cast<size_t>(x)];
          const int a = tx.i0 * 3 + ch, b = tx.i1 * 3 + ch;
          float top = r0[a] + (r0[b] - r0[a]) * tx.w1;
          float bottom = r1[a] + (r1[b] - r1[a]) * tx.w1;
          float v = top + (bottom - top) * ty.w1;
          if (out_f) {
            out_f[x] = v * scale[ch] + bias[ch];
          } else {
            // Clamped to [0, 255], where +0.5 and truncation round half up, faster than lround.
            // NOLINTNEXTLINE(bugprone-incorrect-roundings)
            out_b[x] = static_cast<uint8_t>(std::min(255.f, std::max(0.f, v)) + 0.5f);
          }
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace reel::loader
