#include "loader/resample.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/random.h"

namespace reel::loader::internal {
namespace {

// One frame through both kernels: the vector one (where this CPU has AVX2) and the scalar one
// every other CPU runs must give the same bits, for floats and for bytes.
void ExpectKernelsAgree(int w, int h, int n, double x, double y, double cw, double ch,
                        bool mirror) {
  Rng rng(static_cast<uint64_t>(w * 7919 + h * 31 + n));
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * 3);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() & 0xff);
  const size_t plane = static_cast<size_t>(n) * n;
  std::vector<float> f[2];
  std::vector<uint8_t> b[2];
  for (int k = 0; k < 2; ++k) {
    FrameResampler resampler(w, AxisTaps(x, cw, w, n, mirror), AxisTaps(y, ch, h, n, false),
                             /*vector=*/k == 0);
    f[k].assign(3 * plane, -1);
    b[k].assign(3 * plane, 7);
    PlaneOut floats, bytes;
    for (size_t c = 0; c < 3; ++c) {
      floats.f32[c] = f[k].data() + c * plane;
      floats.scale[c] = 0.5f + static_cast<float>(c);
      floats.bias[c] = -1.25f;
      bytes.u8[c] = b[k].data() + c * plane;
    }
    resampler.Resample(pixels.data(), floats);
    resampler.Resample(pixels.data(), bytes);
  }
  EXPECT_EQ(f[0], f[1]) << w << "x" << h << " -> " << n;
  EXPECT_EQ(b[0], b[1]) << w << "x" << h << " -> " << n;
}

TEST(FrameResamplerTest, VectorAndScalarKernelsGiveTheSameBits) {
  ExpectKernelsAgree(112, 112, 112, 5.5, 3.25, 100.2, 104.9, false);  // the main job's
  ExpectKernelsAgree(171, 128, 112, 0, 0, 171, 128, true);            // shrunk 1.5x, mirrored
  ExpectKernelsAgree(640, 360, 56, 10, 20, 600, 300, false);  // shrunk 10x: the scalar blocks
  ExpectKernelsAgree(50, 40, 37, 3, 2, 20, 15, true);         // enlarged, an odd size
  ExpectKernelsAgree(2, 9, 24, 0, 0, 2, 9, false);            // two pixels wide
  ExpectKernelsAgree(1, 5, 8, 0, 0, 1, 5, false);             // one: never vector
}

TEST(FrameResamplerTest, AxisTapsSampleAtPixelCentresAndClampAtTheEdges) {
  // 4 pixels to 2: centres at 0.5 and 2.5 of the source.
  std::vector<Tap> taps = AxisTaps(0, 4, 4, 2, false);
  EXPECT_EQ(taps[0].i0, 0);
  EXPECT_FLOAT_EQ(taps[0].w1, 0.5f);
  EXPECT_EQ(taps[1].i0, 2);
  // Enlarged 2 to 4: the first and last centres fall outside and clamp.
  taps = AxisTaps(0, 2, 2, 4, false);
  EXPECT_EQ(taps[0].i0, 0);
  EXPECT_FLOAT_EQ(taps[0].w1, 0.f);
  EXPECT_EQ(taps[3].i0, 1);
  EXPECT_EQ(taps[3].i1, 1);
  // Mirrored: the first output samples where the last would.
  std::vector<Tap> mirrored = AxisTaps(0, 4, 4, 2, true);
  EXPECT_EQ(mirrored[0].i0, AxisTaps(0, 4, 4, 2, false)[1].i0);
}

}  // namespace
}  // namespace reel::loader::internal
