#include "media/convert.h"

extern "C" {
#include <libavutil/imgutils.h>
}

#include <string>

namespace reel::media::internal {

int SwsFlags(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest:
      return SWS_POINT;
    case Interpolation::kBilinear:
      return SWS_BILINEAR;
    case Interpolation::kBicubic:
      return SWS_BICUBIC;
    case Interpolation::kArea:
      return SWS_AREA;
  }
  return SWS_BILINEAR;
}

Status SwsConverter::Convert(const AVFrame* src, AVFrame* dst, int flags) {
  auto src_format = static_cast<AVPixelFormat>(src->format);
  auto dst_format = static_cast<AVPixelFormat>(dst->format);
  SwsContext* previous = ctx_.get();
  SwsContext* ctx =
      sws_getCachedContext(ctx_.release(), src->width, src->height, src_format, dst->width,
                           dst->height, dst_format, flags, nullptr, nullptr, nullptr);
  ctx_.reset(ctx);
  if (ctx == nullptr) {
    const char* from = av_get_pix_fmt_name(src_format);
    const char* to = av_get_pix_fmt_name(dst_format);
    return InvalidArgumentError(std::string("swscale cannot convert ") + (from ? from : "?") + " " +
                                std::to_string(src->width) + "x" + std::to_string(src->height) +
                                " to " + (to ? to : "?") + " " + std::to_string(dst->width) + "x" +
                                std::to_string(dst->height));
  }
  if (ctx != previous) colorspace_ = range_ = -1;
  if (src->colorspace != colorspace_ || src->color_range != range_) {
    // As libavfilter's scale filter: the source's matrix and range, the destination's defaults.
    int* inv_table = nullptr;
    int* table = nullptr;
    int src_full = 0, dst_full = 0, brightness = 0, contrast = 0, saturation = 0;
    if (sws_getColorspaceDetails(ctx, &inv_table, &src_full, &table, &dst_full, &brightness,
                                 &contrast, &saturation) >= 0) {
      int colorspace = src->colorspace;
      if (colorspace < 1 || colorspace > 7) colorspace = AVCOL_SPC_BT470BG;  // BT.601
      const int* coefficients = sws_getCoefficients(colorspace);
      if (src->color_range != AVCOL_RANGE_UNSPECIFIED) {
        src_full = src->color_range == AVCOL_RANGE_JPEG;
      }
      sws_setColorspaceDetails(ctx, coefficients, src_full, table, dst_full, brightness, contrast,
                               saturation);
    }
    colorspace_ = src->colorspace;
    range_ = src->color_range;
  }
  if (dst->data[0] == nullptr) {
    int ret = av_frame_get_buffer(dst, 0);
    if (ret < 0) return AvErrorToStatus(ret, "allocating a frame");
  } else if (dst->buf[0] != nullptr) {
    int ret = av_frame_make_writable(dst);
    if (ret < 0) return AvErrorToStatus(ret, "allocating a frame");
  }  // else: planes the caller owns and keeps writable
  int rows = sws_scale(ctx, src->data, src->linesize, 0, src->height, dst->data, dst->linesize);
  if (rows <= 0) return AvErrorToStatus(rows < 0 ? rows : AVERROR_UNKNOWN, "swscale");
  return Status::Ok();
}

Status CheckFrame(const Frame& frame, std::string_view what) {
  if (frame.width <= 0 || frame.height <= 0) {
    return InvalidArgumentError(std::string(what) + ": frame size " + std::to_string(frame.width) +
                                "x" + std::to_string(frame.height) + " is not positive");
  }
  size_t want = Frame::ByteSize(frame.width, frame.height, frame.format);
  if (frame.data.size() != want) {
    return InvalidArgumentError(std::string(what) + ": frame of " + std::to_string(frame.width) +
                                "x" + std::to_string(frame.height) + " holds " +
                                std::to_string(frame.data.size()) + " bytes, expected " +
                                std::to_string(want));
  }
  return Status::Ok();
}

Result<AVFramePtr> ToAVFrame(const Frame& frame) {
  REEL_RETURN_IF_ERROR(CheckFrame(frame, "converting"));
  AVFramePtr out = MakeFrame();
  if (!out) return OutOfMemory("converting");
  out->format = ToAVPixelFormat(frame.format);
  out->width = frame.width;
  out->height = frame.height;
  int ret = av_frame_get_buffer(out.get(), 0);
  if (ret < 0) return AvErrorToStatus(ret, "allocating a frame");
  const uint8_t* src_data[4] = {nullptr, nullptr, nullptr, nullptr};
  int src_linesize[4] = {0, 0, 0, 0};
  ret = av_image_fill_arrays(const_cast<uint8_t**>(src_data), src_linesize, frame.data.data(),
                             static_cast<AVPixelFormat>(out->format), frame.width, frame.height, 1);
  if (ret < 0) return AvErrorToStatus(ret, "converting");
  av_image_copy(out->data, out->linesize, src_data, src_linesize,
                static_cast<AVPixelFormat>(out->format), frame.width, frame.height);
  return out;
}

Result<Frame> FromAVFrame(const AVFrame* src, PixelFormat format) {
  auto src_format = static_cast<AVPixelFormat>(src->format);
  AVPixelFormat want = ToAVPixelFormat(format);
  bool same =
      src_format == want || (format == PixelFormat::kYuv420p && src_format == AV_PIX_FMT_YUVJ420P);
  if (!same) return InternalError("FromAVFrame: format mismatch");
  Frame out = Frame::Make(src->width, src->height, format);
  int ret = av_image_copy_to_buffer(out.data.data(), static_cast<int>(out.data.size()), src->data,
                                    src->linesize, want, src->width, src->height, 1);
  if (ret < 0) return AvErrorToStatus(ret, "copying a frame");
  return out;
}

}  // namespace reel::media::internal
