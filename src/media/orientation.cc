#include "media/orientation.h"

extern "C" {
#include <libavutil/display.h>
}

#include <cmath>

namespace reel::media::internal {

OrientationInfo OrientationFromMatrix(const int32_t* m) {
  OrientationInfo info;
  if (m == nullptr) return info;
  double rotation = av_display_rotation_get(m);  // counter-clockwise degrees, NaN if degenerate
  if (std::isnan(rotation)) return info;
  // fftools/cmdutils.c get_rotation: clockwise degrees in [0, 360).
  double theta = -std::round(rotation);
  theta -= 360 * std::floor(theta / 360 + 0.9 / 360);

  Orientation& o = info.orientation;
  if (std::fabs(theta - 90) < 1.0) {
    info.rotation = 90;
    info.mirrored = m[3] > 0;
    o = info.mirrored ? Orientation{true, false, false}  // transpose=cclock_flip
                      : Orientation{true, true, false};  // transpose=clock
  } else if (std::fabs(theta - 180) < 1.0) {
    info.rotation = 180;
    o.hflip = m[0] < 0;
    o.vflip = m[4] < 0;
    info.mirrored = o.hflip != o.vflip;
  } else if (std::fabs(theta - 270) < 1.0) {
    info.rotation = 270;
    info.mirrored = m[3] < 0;
    o = info.mirrored ? Orientation{true, true, true}    // transpose=clock_flip
                      : Orientation{true, false, true};  // transpose=cclock
  } else if (std::fabs(theta) > 1.0 && std::fabs(theta - 360) > 1.0) {
    // Not a multiple of 90 degrees (FFmpeg would rotate with resampling): the nearest one.
    int r = static_cast<int>(std::lround(theta / 90.0)) % 4 * 90;
    info.rotation = r;
    o = Orientation::Rotation(r);
  } else {
    o.vflip = m[4] < 0;
    info.mirrored = o.vflip;
  }
  return info;
}

OrientationInfo StreamOrientation(const AVStream* stream) {
  size_t size = 0;
  const uint8_t* data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (data == nullptr || size < 9 * sizeof(int32_t)) return OrientationInfo{};
  return OrientationFromMatrix(reinterpret_cast<const int32_t*>(data));
}

}  // namespace reel::media::internal
