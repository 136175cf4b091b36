#include "media/scaler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/check.h"
#include "media/convert.h"
#include "media/ffmpeg_util.h"

namespace reel::media {

using internal::AVFramePtr;

Orientation Orientation::Rotation(int degrees) {
  int quarter = static_cast<int>(std::lround(degrees / 90.0)) % 4;
  if (quarter < 0) quarter += 4;
  switch (quarter) {
    case 1:
      return Orientation{true, true, false};
    case 2:
      return Orientation{false, true, true};
    case 3:
      return Orientation{true, false, true};
    default:
      return Orientation{};
  }
}

struct Scaler::Impl {
  int src_width = 0, src_height = 0;
  PixelFormat src_format = PixelFormat::kRgb24;
  int dst_width = 0, dst_height = 0;
  PixelFormat dst_format = PixelFormat::kRgb24;
  int flags = 0;
  internal::SwsConverter converter;
  AVFramePtr dst;
};

Scaler::Scaler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scaler::Scaler(Scaler&&) noexcept = default;
Scaler& Scaler::operator=(Scaler&&) noexcept = default;
Scaler::~Scaler() = default;

Result<Scaler> Scaler::Create(int src_width, int src_height, PixelFormat src_format, int dst_width,
                              int dst_height, PixelFormat dst_format, Interpolation interpolation) {
  internal::EnsureFfmpegLogging();
  if (src_width <= 0 || src_height <= 0 || dst_width <= 0 || dst_height <= 0) {
    return InvalidArgumentError("Scaler: sizes must be positive (" + std::to_string(src_width) +
                                "x" + std::to_string(src_height) + " -> " +
                                std::to_string(dst_width) + "x" + std::to_string(dst_height) + ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->src_width = src_width;
  impl->src_height = src_height;
  impl->src_format = src_format;
  impl->dst_width = dst_width;
  impl->dst_height = dst_height;
  impl->dst_format = dst_format;
  impl->flags = internal::SwsFlags(interpolation);
  impl->dst = internal::MakeFrame();
  if (!impl->dst) return internal::OutOfMemory("Scaler");
  return Scaler(std::move(impl));
}

int Scaler::dst_width() const { return impl_->dst_width; }
int Scaler::dst_height() const { return impl_->dst_height; }
PixelFormat Scaler::dst_format() const { return impl_->dst_format; }

Result<Frame> Scaler::Scale(const Frame& in) {
  REEL_RETURN_IF_ERROR(internal::CheckFrame(in, "Scaler"));
  if (in.width != impl_->src_width || in.height != impl_->src_height ||
      in.format != impl_->src_format) {
    return InvalidArgumentError(
        "Scaler: frame is " + std::to_string(in.width) + "x" + std::to_string(in.height) +
        ", not the size and format given "
        "to Create (" +
        std::to_string(impl_->src_width) + "x" + std::to_string(impl_->src_height) + ")");
  }
  REEL_ASSIGN_OR_RETURN(AVFramePtr src, internal::ToAVFrame(in));
  AVFrame* dst = impl_->dst.get();
  if (dst->data[0] == nullptr) {
    dst->format = internal::ToAVPixelFormat(impl_->dst_format);
    dst->width = impl_->dst_width;
    dst->height = impl_->dst_height;
  }
  REEL_RETURN_IF_ERROR(impl_->converter.Convert(src.get(), dst, impl_->flags));
  REEL_ASSIGN_OR_RETURN(Frame out, internal::FromAVFrame(dst, impl_->dst_format));
  out.index = in.index;
  out.timestamp_s = in.timestamp_s;
  return out;
}

Result<Frame> Resize(const Frame& in, int width, int height, Interpolation interpolation) {
  REEL_ASSIGN_OR_RETURN(Scaler scaler, Scaler::Create(in.width, in.height, in.format, width, height,
                                                      in.format, interpolation));
  return scaler.Scale(in);
}

Result<Frame> ConvertFormat(const Frame& in, PixelFormat format) {
  if (format == in.format) {
    REEL_RETURN_IF_ERROR(internal::CheckFrame(in, "ConvertFormat"));
    return in;
  }
  REEL_ASSIGN_OR_RETURN(Scaler scaler, Scaler::Create(in.width, in.height, in.format, in.width,
                                                      in.height, format, Interpolation::kBicubic));
  return scaler.Scale(in);
}

std::pair<int, int> ShortSideSize(int width, int height, int short_side) {
  if (width <= 0 || height <= 0 || short_side <= 0) return {width, height};
  // As torchvision's Resize(int): the long side truncated, not rounded.
  if (width <= height) {
    int64_t h = static_cast<int64_t>(height) * short_side / width;
    return {short_side, static_cast<int>(std::max<int64_t>(1, h))};
  }
  int64_t w = static_cast<int64_t>(width) * short_side / height;
  return {static_cast<int>(std::max<int64_t>(1, w)), short_side};
}

namespace {

struct Plane {
  size_t offset;  // into Frame::data
  int width;
  int height;
  int channels;
};

// The planes of a packed frame of the given size and format.
int Planes(int width, int height, PixelFormat format, Plane planes[3]) {
  switch (format) {
    case PixelFormat::kRgb24:
      planes[0] = {0, width, height, 3};
      return 1;
    case PixelFormat::kGray8:
      planes[0] = {0, width, height, 1};
      return 1;
    case PixelFormat::kYuv420p: {
      int cw = (width + 1) / 2, ch = (height + 1) / 2;
      size_t luma = static_cast<size_t>(width) * height;
      size_t chroma = static_cast<size_t>(cw) * ch;
      planes[0] = {0, width, height, 1};
      planes[1] = {luma, cw, ch, 1};
      planes[2] = {luma + chroma, cw, ch, 1};
      return 3;
    }
  }
  return 0;
}

}  // namespace

Result<Frame> Crop(const Frame& in, int x, int y, int width, int height) {
  REEL_RETURN_IF_ERROR(internal::CheckFrame(in, "Crop"));
  if (in.format == PixelFormat::kYuv420p) {
    x &= ~1;
    y &= ~1;
  }
  if (width <= 0 || height <= 0 || x < 0 || y < 0 || x + width > in.width ||
      y + height > in.height) {
    return InvalidArgumentError("Crop: window " + std::to_string(width) + "x" +
                                std::to_string(height) + " at (" + std::to_string(x) + "," +
                                std::to_string(y) + ") does not fit a " + std::to_string(in.width) +
                                "x" + std::to_string(in.height) + " frame");
  }
  Frame out = Frame::MakeLike(in, width, height);
  Plane src[3], dst[3];
  int n = Planes(in.width, in.height, in.format, src);
  Planes(width, height, in.format, dst);
  for (int p = 0; p < n; ++p) {
    int px = p == 0 ? x : x / 2, py = p == 0 ? y : y / 2;
    size_t row_bytes = static_cast<size_t>(dst[p].width) * dst[p].channels;
    for (int r = 0; r < dst[p].height; ++r) {
      const uint8_t* s = in.data.data() + src[p].offset +
                         (static_cast<size_t>(py + r) * src[p].width + px) * src[p].channels;
      uint8_t* d = out.data.data() + dst[p].offset + static_cast<size_t>(r) * row_bytes;
      std::memcpy(d, s, row_bytes);
    }
  }
  return out;
}

Result<Frame> CenterCrop(const Frame& in, int width, int height) {
  return Crop(in, (in.width - width) / 2, (in.height - height) / 2, width, height);
}

Frame Orient(const Frame& in, Orientation o) {
  if (o.identity()) return in;
  int out_w = o.transpose ? in.height : in.width;
  int out_h = o.transpose ? in.width : in.height;
  Frame out = Frame::MakeLike(in, out_w, out_h);
  // A malformed frame is a caller's bug: checked in debug builds, zeros otherwise.
  REEL_CHECK(in.data.size() == Frame::ByteSize(in.width, in.height, in.format));
  if (in.data.size() != Frame::ByteSize(in.width, in.height, in.format)) return out;
  Plane src[3], dst[3];
  int n = Planes(in.width, in.height, in.format, src);
  Planes(out_w, out_h, in.format, dst);
  for (int p = 0; p < n; ++p) {
    const int c = src[p].channels;
    const uint8_t* s = in.data.data() + src[p].offset;
    uint8_t* d = out.data.data() + dst[p].offset;
    const int dw = dst[p].width, dh = dst[p].height, sw = src[p].width;
    for (int y = 0; y < dh; ++y) {
      int ty = o.vflip ? dh - 1 - y : y;
      for (int x = 0; x < dw; ++x) {
        int tx = o.hflip ? dw - 1 - x : x;
        int sx = o.transpose ? ty : tx;
        int sy = o.transpose ? tx : ty;
        const uint8_t* sp = s + (static_cast<size_t>(sy) * sw + sx) * c;
        uint8_t* dp = d + (static_cast<size_t>(y) * dw + x) * c;
        for (int k = 0; k < c; ++k) dp[k] = sp[k];
      }
    }
  }
  return out;
}

}  // namespace reel::media
