// Internal to src/media: swscale conversions between AVFrames, and copies between AVFrames and
// packed Frames. swscale's SIMD code may read and write a little past the end of a row, so it only
// ever sees FFmpeg-allocated (aligned, padded) AVFrames; packed Frames are copied in and out.
#pragma once

#include <array>

#include "base/status.h"
#include "media/ffmpeg_util.h"
#include "media/frame.h"
#include "media/scaler.h"

namespace reel::media::internal {

int SwsFlags(Interpolation interpolation);

// A swscale context reused while the geometry stays the same.
class SwsConverter {
 public:
  // Converts `src` into `dst`, which must have format, width and height set. Without data, its
  // buffer is allocated here; with reference-counted buffers, they are made writable first; with
  // bare data pointers (no buf), swscale writes into them as they are. The source's colour matrix
  // and range (src->colorspace, src->color_range) are honoured as FFmpeg's scale filter does;
  // unspecified means BT.601 limited range.
  // A YUV `dst` is tagged with the matrix and range its values have.
  Status Convert(const AVFrame* src, AVFrame* dst, int flags);

 private:
  void TagColor(const AVFrame* src, AVFrame* dst) const;

  SwsContextPtr ctx_;
  std::array<int, 7> geometry_ = {};  // sizes, formats and flags asked of ctx_
  int made_flags_ = 0;                // the flags ctx_ has (swscale may have added some)
  int colorspace_ = -1;
  int range_ = -1;
  int dst_range_ = -1;  // the AVColorRange swscale writes into a YUV destination
};

// A new AVFrame holding a copy of `frame` (InvalidArgument when its data size is wrong), a YUV
// frame's colour tags included.
Result<AVFramePtr> ToAVFrame(const Frame& frame);
// A packed copy of `src` (whose format must be `format`'s AVPixelFormat, or YUVJ420P for
// kYuv420p), with a YUV frame's colour matrix and range from src's tags (YUVJ: full range).
Result<Frame> FromAVFrame(const AVFrame* src, PixelFormat format);
// InvalidArgument unless frame.data has ByteSize(width, height, format) bytes and sizes > 0.
Status CheckFrame(const Frame& frame, std::string_view what);

}  // namespace reel::media::internal
