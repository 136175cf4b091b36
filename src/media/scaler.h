// Pixel work on Frames: colour conversion and resizing with libswscale (Scaler), centre crops,
// and lossless changes of orientation (rotations by multiples of 90 degrees, mirrors).
//
// Colour: a YUV420P frame's matrix and range are its tags (Frame::color_matrix, full_range;
// untagged is BT.601 limited range, what swscale assumes), and conversions from it honour them;
// RGB becomes BT.601 limited-range YUV. VideoDecoder converts from the decoder's frames
// directly, with each video's own matrix and range; these functions are for Frames in memory.
//
// Errors: InvalidArgument for sizes that are not positive, frames whose data does not match their
// width, height and format, and crops larger than the frame; ResourceExhausted when FFmpeg cannot
// allocate.
// Thread-safety: a Scaler belongs to one thread at a time; the free functions are safe anywhere.
#pragma once

#include <memory>
#include <utility>

#include "base/status.h"
#include "media/frame.h"

namespace reel::media {

enum class Interpolation {
  kNearest,   // SWS_POINT
  kBilinear,  // SWS_BILINEAR: the default; what most training pipelines use
  kBicubic,   // SWS_BICUBIC: what the ffmpeg command line uses
  kArea,      // SWS_AREA: averages when shrinking a lot, avoids aliasing
};

// A lossless change of orientation: transpose (swap x and y) when `transpose`, then mirror
// left-right when `hflip`, then top-bottom when `vflip`. Rotations: 90 clockwise is
// {transpose, hflip}, 180 is {hflip, vflip}, 270 clockwise is {transpose, vflip}.
struct Orientation {
  bool transpose = false;
  bool hflip = false;
  bool vflip = false;

  bool identity() const { return !transpose && !hflip && !vflip; }
  // `degrees` clockwise, one of 0, 90, 180, 270 (others are rounded to the nearest of them).
  static Orientation Rotation(int degrees);
  friend bool operator==(const Orientation& a, const Orientation& b) {
    return a.transpose == b.transpose && a.hflip == b.hflip && a.vflip == b.vflip;
  }
};

// Converts and resizes frames of one size and format into another size and format.
// Reuses its swscale context across calls.
class Scaler {
 public:
  static Result<Scaler> Create(int src_width, int src_height, PixelFormat src_format, int dst_width,
                               int dst_height, PixelFormat dst_format,
                               Interpolation interpolation = Interpolation::kBilinear);
  Scaler(Scaler&&) noexcept;
  Scaler& operator=(Scaler&&) noexcept;
  ~Scaler();

  // `in` must have the source size and format given to Create (else InvalidArgument).
  Result<Frame> Scale(const Frame& in);

  int dst_width() const;
  int dst_height() const;
  PixelFormat dst_format() const;

 private:
  struct Impl;
  explicit Scaler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One-off conversions (a Scaler made for the call).
Result<Frame> Resize(const Frame& in, int width, int height,
                     Interpolation interpolation = Interpolation::kBilinear);
Result<Frame> ConvertFormat(const Frame& in, PixelFormat format);

// The size that keeps the aspect ratio of width x height with its shorter side `short_side`; the
// longer side is truncated (at least 1), as torchvision's Resize(int) does: 340x256 -> 42x32.
// Returns the size unchanged when any argument is not positive.
std::pair<int, int> ShortSideSize(int width, int height, int short_side);

// The width x height window at (x, y). For YUV420P, x and y are rounded down to even numbers so
// that chroma stays aligned. InvalidArgument when the window does not fit in the frame.
Result<Frame> Crop(const Frame& in, int x, int y, int width, int height);
// The centred width x height window (offsets rounded down).
Result<Frame> CenterCrop(const Frame& in, int width, int height);

// `in` re-oriented; exact (pixels are moved, never resampled). YUV420P planes are turned each on
// its own, as FFmpeg's transpose/hflip/vflip filters do.
Frame Orient(const Frame& in, Orientation orientation);

}  // namespace reel::media
