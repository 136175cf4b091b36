// Internal to src/media: how a video stream's display matrix turns its frames, the way the ffmpeg
// command line's autorotation reads it (fftools' get_rotation and its transpose/hflip/vflip
// choices), so that decoded frames match `ffmpeg -i F` pixel for pixel.
#pragma once

extern "C" {
#include <libavformat/avformat.h>
}

#include <cstdint>

#include "media/scaler.h"

namespace reel::media::internal {

struct OrientationInfo {
  Orientation orientation;  // what to apply to decoded frames
  int rotation = 0;         // clockwise degrees, 0/90/180/270
  bool mirrored = false;
};

// From a 3x3 display matrix (AV_PKT_DATA_DISPLAYMATRIX), or identity for nullptr.
OrientationInfo OrientationFromMatrix(const int32_t* matrix);
// From the stream's side data.
OrientationInfo StreamOrientation(const AVStream* stream);

}  // namespace reel::media::internal
