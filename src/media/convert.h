// Internal to src/media: swscale conversions between AVFrames, and copies between AVFrames and
// packed Frames. swscale's SIMD code may read and write a little past the end of a row, so it only
// ever sees FFmpeg-allocated (aligned, padded) AVFrames; packed Frames are copied in and out.
#pragma once

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
  Status Convert(const AVFrame* src, AVFrame* dst, int flags);

 private:
  SwsContextPtr ctx_;
  int colorspace_ = -1;
  int range_ = -1;
};

// A new AVFrame holding a copy of `frame` (InvalidArgument when its data size is wrong).
Result<AVFramePtr> ToAVFrame(const Frame& frame);
// A packed copy of `src` (whose format must be `format`'s AVPixelFormat, or YUVJ420P for
// kYuv420p).
Result<Frame> FromAVFrame(const AVFrame* src, PixelFormat format);
// InvalidArgument unless frame.data has ByteSize(width, height, format) bytes and sizes > 0.
Status CheckFrame(const Frame& frame, std::string_view what);

}  // namespace reel::media::internal
