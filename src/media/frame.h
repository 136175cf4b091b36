// A decoded or synthesised video frame in memory, the unit that media, ingest and the loader pass
// around. Pixels are packed, rows without padding: RGB24 is height x width x 3 bytes, GRAY8 is
// height x width, YUV420P is the Y plane then U then V (each chroma plane ceil(w/2) x ceil(h/2)).
// Thread-safety: a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace reel::media {

enum class PixelFormat { kRgb24, kGray8, kYuv420p };

struct Frame {
  int width = 0;
  int height = 0;
  PixelFormat format = PixelFormat::kRgb24;
  std::vector<uint8_t> data;
  int64_t index = -1;        // position in presentation order within its video, when known
  double timestamp_s = 0.0;  // presentation time in seconds from the video's first frame
  // YUV420P only: how the values map to RGB. The colour matrix as ITU-T H.273 numbers it (and
  // FFmpeg's AVColorSpace): 1 BT.709, 5 or 6 BT.601, 9 BT.2020, 2 unspecified (read as BT.601);
  // full range spans 0-255, limited (video) range 16-235 for luma.
  int color_matrix = kUnspecifiedMatrix;
  bool full_range = false;
  static constexpr int kUnspecifiedMatrix = 2;

  // Bytes a frame of this size and format occupies.
  static size_t ByteSize(int width, int height, PixelFormat format) {
    size_t w = static_cast<size_t>(width), h = static_cast<size_t>(height);
    switch (format) {
      case PixelFormat::kRgb24:
        return w * h * 3;
      case PixelFormat::kGray8:
        return w * h;
      case PixelFormat::kYuv420p:
        return w * h + 2 * ((w + 1) / 2) * ((h + 1) / 2);
    }
    return 0;
  }
  // An allocated frame of the given size (pixels zero).
  static Frame Make(int width, int height, PixelFormat format = PixelFormat::kRgb24) {
    Frame f;
    f.width = width;
    f.height = height;
    f.format = format;
    f.data.assign(ByteSize(width, height, format), 0);
    return f;
  }
  // An allocated frame with `like`'s format, position in its video and colour, at another size.
  static Frame MakeLike(const Frame& like, int width, int height) {
    Frame f = Make(width, height, like.format);
    f.index = like.index;
    f.timestamp_s = like.timestamp_s;
    f.color_matrix = like.color_matrix;
    f.full_range = like.full_range;
    return f;
  }
  uint8_t* Pixel(int x, int y) { return data.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* Pixel(int x, int y) const {
    return data.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
};

}  // namespace reel::media
