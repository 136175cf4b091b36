#include "loader/clip_transform.h"

#include <algorithm>
#include <cmath>

#include "loader/resample.h"

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

namespace {

Status CheckClipInputs(const FrameStack& s, const ClipOptions& clip, const TransformOptions& t) {
  if (s.c != 3 || s.t < 1 || s.h < 1 || s.w < 1 ||
      s.pixels.size() != static_cast<size_t>(s.t) * s.h * s.w * s.c) {
    return InvalidArgumentError("frame stack is not T x H x W x 3 uint8");
  }
  if (t.size < 1) return InvalidArgumentError("transform size must be positive");
  if (clip.frames < 1 || clip.stride < 1) {
    return InvalidArgumentError("clip frames and stride must be at least 1");
  }
  return Status::Ok();
}

}  // namespace

int64_t ClipValues(const ClipOptions& clip, const TransformOptions& transform) {
  return 3 * static_cast<int64_t>(clip.frames) * transform.size * transform.size;
}

Status MakeClipInto(const FrameStack& s, int start, const ClipOptions& clip,
                    const TransformOptions& t, Flips flips, Rng& rng, float* out_f32,
                    uint8_t* out_u8) {
  REEL_RETURN_IF_ERROR(CheckClipInputs(s, clip, t));
  // The same crop and flip for every frame of the clip: motion stays consistent.
  const Box box = t.train ? RandomResizedBox(s.w, s.h, t, rng) : CentreBox(s.w, s.h, t.size);
  const int n = t.size;
  internal::FrameResampler resampler(s.w, internal::AxisTaps(box.x, box.w, s.w, n, flips.mirror),
                                     internal::AxisTaps(box.y, box.h, s.h, n, false));
  internal::PlaneOut out;
  for (size_t ch = 0; ch < 3; ++ch) {
    // x / 255 then (x - mean) / std, folded into one multiply-add.
    out.scale[ch] = 1.f / (255.f * t.std[ch]);
    out.bias[ch] = -t.mean[ch] / t.std[ch];
  }
  const size_t plane = static_cast<size_t>(n) * n;
  const size_t channel_stride = static_cast<size_t>(clip.frames) * plane;
  const size_t frame_bytes = static_cast<size_t>(s.h) * s.w * 3;
  for (int f = 0; f < clip.frames; ++f) {
    const int played = flips.reverse ? clip.frames - 1 - f : f;
    const int frame = std::min(start + played * clip.stride, s.t - 1);
    for (size_t ch = 0; ch < 3; ++ch) {
      const size_t at = ch * channel_stride + static_cast<size_t>(f) * plane;
      if (t.normalize)
        out.f32[ch] = out_f32 + at;
      else
        out.u8[ch] = out_u8 + at;
    }
    resampler.Resample(reinterpret_cast<const uint8_t*>(s.pixels.data()) +
                           static_cast<size_t>(frame) * frame_bytes,
                       out);
  }
  return Status::Ok();
}

Status MakeClip(const FrameStack& s, int start, const ClipOptions& clip, const TransformOptions& t,
                Flips flips, Rng& rng, std::vector<float>* out_f32, std::vector<uint8_t>* out_u8) {
  REEL_RETURN_IF_ERROR(CheckClipInputs(s, clip, t));
  const auto total = static_cast<size_t>(ClipValues(clip, t));
  if (t.normalize) {
    const size_t base = out_f32->size();
    out_f32->resize(base + total);
    return MakeClipInto(s, start, clip, t, flips, rng, out_f32->data() + base, nullptr);
  }
  const size_t base = out_u8->size();
  out_u8->resize(base + total);
  return MakeClipInto(s, start, clip, t, flips, rng, nullptr, out_u8->data() + base);
}

}  // namespace reel::loader
