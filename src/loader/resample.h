// Bilinear resampling of interleaved RGB uint8 frames into planar values (the loader's crop and
// resize), in two passes: along x for each source row the output reads, each row once however
// many output rows blend it, then along y into the output planes. Where the CPU has AVX2 both
// passes run 8 values at a time, without FMA, so that every multiply and add rounds as on the one-
// value-at-a-time path: the result is the same, bit for bit, on every CPU.
// Internal to the loader; clip_transform.h is the contract.
// Thread-safety: a FrameResampler belongs to one thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace reel::loader::internal {

// Output pixel o of n, sampled at its centre (align_corners = false), blends source pixels i0
// and i1 of an axis: (1 - w1) * [i0] + w1 * [i1].
struct Tap {
  int i0, i1;
  float w1;
};

// The n taps of a crop [origin, origin + extent) of an axis `limit` pixels long, clamped to it;
// mirrored, output pixel o samples where n - 1 - o would.
std::vector<Tap> AxisTaps(double origin, double extent, int limit, int n, bool mirror);

// Where one output frame goes: per channel an n x n plane of normalised floats (value * scale +
// bias) or of bytes (rounded half up, clamped to 0..255).
struct PlaneOut {
  std::array<float*, 3> f32 = {nullptr, nullptr, nullptr};
  std::array<uint8_t*, 3> u8 = {nullptr, nullptr, nullptr};
  std::array<float, 3> scale = {1, 1, 1}, bias = {0, 0, 0};
};

// The vector x pass's plan, per block of 8 output pixels: the first of the 16 source pixels its
// taps lie in (-1: they spread wider, the block takes the scalar path), then 8 indices of the
// left and 8 of the right neighbours within those 16 (a byte shuffle's), and the weights.
struct XBlocks {
  std::vector<int> base;
  std::vector<uint8_t> index;
  std::vector<float> w1;
};

class FrameResampler {
 public:
  // Frames `width` pixels wide; xs and ys from AxisTaps (n of each). `vector`: use the AVX2
  // kernels where the CPU has them (false: one value at a time, for comparing the two).
  FrameResampler(int width, std::vector<Tap> xs, std::vector<Tap> ys, bool vector = true);

  // One frame, width x height x 3 bytes at `pixels`, into `out`.
  void Resample(const uint8_t* pixels, const PlaneOut& out);

 private:
  void PlanBlocks();
  const float* AlongX(const uint8_t* pixels, int row, int keep);

  int width_, n_;
  std::vector<Tap> xs_, ys_;
  bool vector_ = false;
  XBlocks blocks_;
  std::array<std::vector<uint8_t>, 3> planes_;  // the row being resampled, one plane per channel
  // The last two source rows resampled along x (3 planes of n values each) and their numbers.
  std::array<int, 2> cached_row_ = {-1, -1};
  std::array<std::vector<float>, 2> cached_;
};

}  // namespace reel::loader::internal
