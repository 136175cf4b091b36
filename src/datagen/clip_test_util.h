// Helpers shared by clip_test.cc and clip_indistinguishability_test.cc: pi and the moments of a
// shape's mask. Tests only.
#pragma once

#include <cstddef>

#include "media/frame.h"

namespace reel::datagen::testing {

// Area (in pixels, the mask's values as weights) and centroid of a GRAY8 mask.
struct Moments {
  double area = 0, cx = 0, cy = 0;
};
inline Moments MaskMoments(const media::Frame& mask) {
  Moments m;
  for (int y = 0; y < mask.height; ++y) {
    for (int x = 0; x < mask.width; ++x) {
      double a = mask.data[static_cast<size_t>(y) * mask.width + x] / 255.0;
      m.area += a;
      m.cx += a * (x + 0.5);
      m.cy += a * (y + 0.5);
    }
  }
  if (m.area > 0) {
    m.cx /= m.area;
    m.cy /= m.area;
  }
  return m;
}

}  // namespace reel::datagen::testing
