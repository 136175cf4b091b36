#include "media/convert.h"

extern "C" {
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
}

#include <array>
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

namespace {

// swscale turns the deprecated full-range "J" formats into their plain twins when it sets a
// context up, so a cached context never matched them again: every frame got a new one (which
// may sit at the old address), without the colour details set below. The twin goes in instead,
// and the range comes from the frame.
AVPixelFormat PlainTwin(AVPixelFormat format) {
  switch (format) {
    case AV_PIX_FMT_YUVJ420P:
      return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P:
      return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P:
      return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P:
      return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P:
      return AV_PIX_FMT_YUV411P;
    default:
      return format;
  }
}

// Whether `format` holds luma and chroma (not RGB, not gray).
bool IsYuv(AVPixelFormat format) {
  const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(format);
  return d != nullptr && d->nb_components >= 3 && (d->flags & AV_PIX_FMT_FLAG_RGB) == 0;
}

}  // namespace

Status SwsConverter::Convert(const AVFrame* src, AVFrame* dst, int flags) {
  const auto given_format = static_cast<AVPixelFormat>(src->format);
  const AVPixelFormat src_format = PlainTwin(given_format);
  auto dst_format = static_cast<AVPixelFormat>(dst->format);
  // swscale adds flags of its own when it sets a context up (full chroma interpolation for RGB24
  // output), and sws_getCachedContext compares them: asked with the flags given, it made a new
  // context for every frame. For the same geometry, ask with those the context has.
  const std::array<int, 7> geometry = {src->width,  src->height, src_format, dst->width,
                                       dst->height, dst_format,  flags};
  const bool same_geometry = ctx_ && geometry == geometry_;
  SwsContext* ctx = sws_getCachedContext(
      ctx_.release(), src->width, src->height, src_format, dst->width, dst->height, dst_format,
      same_geometry ? made_flags_ : flags, nullptr, nullptr, nullptr);
  ctx_.reset(ctx);
  if (ctx == nullptr) {
    const char* from = av_get_pix_fmt_name(given_format);
    const char* to = av_get_pix_fmt_name(dst_format);
    return InvalidArgumentError(std::string("swscale cannot convert ") + (from ? from : "?") + " " +
                                std::to_string(src->width) + "x" + std::to_string(src->height) +
                                " to " + (to ? to : "?") + " " + std::to_string(dst->width) + "x" +
                                std::to_string(dst->height));
  }
  // A new geometry is a new context, whatever its address.
  if (!same_geometry) {
    colorspace_ = range_ = dst_range_ = -1;
    int64_t made = flags;
    av_opt_get_int(ctx, "sws_flags", 0, &made);
    made_flags_ = static_cast<int>(made);
    geometry_ = geometry;
  }
  if (src->colorspace != colorspace_ || src->color_range != range_) {
    // As libavfilter's scale filter: the source's matrix and range, the destination's defaults.
    int* inv_table = nullptr;
    int* table = nullptr;
    int src_full = 0, dst_full = 0, brightness = 0, contrast = 0, saturation = 0;
    if (sws_getColorspaceDetails(ctx, &inv_table, &src_full, &table, &dst_full, &brightness,
                                 &contrast, &saturation) >= 0) {
      int colorspace = src->colorspace;
      // swscale's tables: BT.709, FCC, BT.601, SMPTE 240M and BT.2020; the rest read as BT.601.
      const bool known = colorspace == AVCOL_SPC_BT709 || colorspace == AVCOL_SPC_FCC ||
                         colorspace == AVCOL_SPC_BT470BG || colorspace == AVCOL_SPC_SMPTE170M ||
                         colorspace == AVCOL_SPC_SMPTE240M || colorspace == AVCOL_SPC_BT2020_NCL ||
                         colorspace == AVCOL_SPC_BT2020_CL;
      if (!known) colorspace = AVCOL_SPC_BT470BG;
      const int* coefficients = sws_getCoefficients(colorspace);
      if (src->color_range != AVCOL_RANGE_UNSPECIFIED) {
        src_full = src->color_range == AVCOL_RANGE_JPEG;
      } else if (given_format != src_format) {
        src_full = 1;  // a J format
      }
      // Between YUV formats, tables that differ make swscale convert the matrix, and FFmpeg 5.1
      // also squeezed the range of limited-range pictures then; the picture keeps its matrix
      // (TagColor says which) and only its range is converted.
      const bool yuv_to_yuv = IsYuv(src_format) && IsYuv(dst_format);
      sws_setColorspaceDetails(ctx, coefficients, src_full, yuv_to_yuv ? coefficients : table,
                               dst_full, brightness, contrast, saturation);
      dst_range_ = dst_full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
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
  TagColor(src, dst);
  return Status::Ok();
}

// swscale keeps a YUV source's matrix (it converts ranges between YUV formats, never matrices)
// and writes YUV from RGB with its default table, BT.601; the range is what it was told to write.
void SwsConverter::TagColor(const AVFrame* src, AVFrame* dst) const {
  if (!IsYuv(static_cast<AVPixelFormat>(dst->format))) return;  // RGB and gray carry no tags
  dst->colorspace =
      IsYuv(static_cast<AVPixelFormat>(src->format)) ? src->colorspace : AVCOL_SPC_SMPTE170M;
  dst->color_range = dst_range_ >= 0 ? static_cast<AVColorRange>(dst_range_) : AVCOL_RANGE_MPEG;
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
  if (frame.format == PixelFormat::kYuv420p) {
    out->colorspace = static_cast<AVColorSpace>(frame.color_matrix);
    out->color_range = frame.full_range ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
  }
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
  if (format == PixelFormat::kYuv420p) {
    const bool known = src->colorspace != AVCOL_SPC_RGB && src->colorspace < AVCOL_SPC_NB;
    out.color_matrix = known ? src->colorspace : Frame::kUnspecifiedMatrix;
    out.full_range = src->color_range == AVCOL_RANGE_JPEG || src_format == AV_PIX_FMT_YUVJ420P;
  }
  return out;
}

}  // namespace reel::media::internal
