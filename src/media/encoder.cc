#include "media/encoder.h"

extern "C" {
#include <libavutil/cpu.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
}

#include <algorithm>
#include <cstring>
#include <string>

#include "media/convert.h"
#include "media/ffmpeg_util.h"

namespace reel::media {
namespace {

using internal::AvErrorToStatus;
using internal::AVFramePtr;

constexpr int kIoBufferSize = 64 * 1024;
constexpr int kMaxDimension = 16384;
constexpr int kMaxColorMatrix = AVCOL_SPC_NB - 1;  // H.273's matrix codes FFmpeg knows

// The file being written: FFmpeg writes and seeks (the MP4 muxer goes back to patch sizes), so
// this is a byte array with a position, not an append-only stream.
struct OutputBuffer {
  std::string data;
  int64_t pos = 0;

  static int Write(void* opaque, uint8_t* buffer, int n) {
    auto* b = static_cast<OutputBuffer*>(opaque);
    if (n <= 0) return 0;
    size_t end = static_cast<size_t>(b->pos) + static_cast<size_t>(n);
    if (end > b->data.size()) b->data.resize(end);
    std::memcpy(b->data.data() + b->pos, buffer, static_cast<size_t>(n));
    b->pos = static_cast<int64_t>(end);
    return n;
  }

  static int64_t Seek(void* opaque, int64_t offset, int whence) {
    auto* b = static_cast<OutputBuffer*>(opaque);
    whence &= ~AVSEEK_FORCE;
    int64_t size = static_cast<int64_t>(b->data.size());
    int64_t target;
    switch (whence) {
      case AVSEEK_SIZE:
        return size;
      case SEEK_SET:
        target = offset;
        break;
      case SEEK_CUR:
        target = b->pos + offset;
        break;
      case SEEK_END:
        target = size + offset;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if (target < 0) return AVERROR(EINVAL);
    b->pos = target;  // writing past the end grows the file (zero-filled gap)
    return target;
  }
};

Status CheckOptions(const EncoderOptions& o) {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("EncoderOptions: " + what);
  };
  if (o.width <= 0 || o.height <= 0 || o.width > kMaxDimension || o.height > kMaxDimension) {
    return bad("size " + std::to_string(o.width) + "x" + std::to_string(o.height) +
               " must be within 1.." + std::to_string(kMaxDimension));
  }
  if (o.fps_num <= 0 || o.fps_den <= 0) {
    return bad("frame rate " + std::to_string(o.fps_num) + "/" + std::to_string(o.fps_den) +
               " must be positive");
  }
  if (o.gop < 0) return bad("gop must be >= 0");
  if (o.crf < 0 || o.crf > 51) return bad("crf " + std::to_string(o.crf) + " outside 0..51");
  if (o.threads < 0) return bad("threads must be >= 0");
  if (o.input != PixelFormat::kRgb24 && (o.codec == "apng" || o.input != PixelFormat::kYuv420p)) {
    return bad("libx264 takes RGB24 or YUV420P frames, apng RGB24");
  }
  // 0 is H.273's "GBR planes", not a YUV matrix.
  if (o.color_matrix < 1 || o.color_matrix > kMaxColorMatrix) {
    return bad("colour matrix " + std::to_string(o.color_matrix) + " outside 1.." +
               std::to_string(kMaxColorMatrix));
  }
  if (o.codec == "apng") return Status::Ok();  // x264's settings do not apply
  if (o.codec != "libx264") return bad("unknown codec '" + o.codec + "' (libx264 or apng)");
  static const char* const kPresets[] = {"ultrafast", "superfast", "veryfast", "faster",
                                         "fast",      "medium",    "slow",     "slower",
                                         "veryslow",  "placebo"};
  if (std::find_if(std::begin(kPresets), std::end(kPresets),
                   [&](const char* p) { return o.preset == p; }) == std::end(kPresets)) {
    return bad("unknown x264 preset '" + o.preset + "'");
  }
  return Status::Ok();
}

class LavcEncoder : public VideoEncoder {
 public:
  explicit LavcEncoder(const EncoderOptions& options) : options_(options) {}
  Status Init();
  Status Add(const Frame& frame) override;
  Result<std::string> Finish() override;

 private:
  Status WritePackets();
  std::string Where() const {
    return "encoding " + options_.container + " (" + options_.codec + ")";
  }
  bool png() const { return options_.codec == "apng"; }
  Status SetUpCodec(AVCodecContext* c);
  Status SendRgb(const Frame& frame);
  Status CheckInput(const Frame& frame) const;
  void CopyYuv(const Frame& frame);
  Status ConvertRgb(const Frame& frame);
  void PadToEven();

  EncoderOptions options_;
  int enc_width_ = 0, enc_height_ = 0;
  OutputBuffer out_;
  // avio_ before format_: the muxer is freed first.
  internal::AVIOContextPtr avio_;
  internal::AVFormatOutputPtr format_;
  internal::AVCodecContextPtr codec_;
  AVStream* stream_ = nullptr;
  internal::SwsConverter converter_;
  AVFramePtr yuv_;
  internal::AVPacketPtr packet_;
  int64_t next_pts_ = 0;
  bool header_written_ = false;
  bool finished_ = false;
};

Status LavcEncoder::SetUpCodec(AVCodecContext* c) {
  c->width = enc_width_;
  c->height = enc_height_;
  c->pix_fmt = png() ? AV_PIX_FMT_RGB24 : AV_PIX_FMT_YUV420P;
  c->time_base = AVRational{options_.fps_den, options_.fps_num};
  c->framerate = AVRational{options_.fps_num, options_.fps_den};
  c->sample_aspect_ratio = AVRational{1, 1};
  c->thread_count = options_.threads;
  if (png()) return Status::Ok();
  // What the YUV pictures hold: swscale's default RGB -> YUV conversion (BT.601, limited range),
  // or the YUV frames' own colour. Say so in the stream.
  const bool yuv = options_.input == PixelFormat::kYuv420p;
  c->colorspace = yuv ? static_cast<AVColorSpace>(options_.color_matrix) : AVCOL_SPC_SMPTE170M;
  c->color_range = yuv && options_.full_range ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
  std::string x264_params;
  if (options_.gop > 0) {
    c->gop_size = options_.gop;
    // Keyframes exactly every `gop` frames: no extra ones at scene cuts.
    x264_params = "scenecut=0";
  }
  if (av_get_cpu_flags() & AV_CPU_FLAG_AVX512) {
    // x264 0.164's AVX-512 code reads uninitialised memory in its macroblock-tree lookahead on
    // some frame sizes (e.g. 112x112, 208x208), so its output would depend on heap garbage and
    // not be repeatable. Its AVX2 code does not; every AVX-512 CPU has AVX2.
    x264_params += std::string(x264_params.empty() ? "" : ":") + "asm=avx2";
  }
  if (!x264_params.empty()) av_opt_set(c->priv_data, "x264-params", x264_params.c_str(), 0);
  av_opt_set(c->priv_data, "preset", options_.preset.c_str(), 0);
  av_opt_set_double(c->priv_data, "crf", options_.crf, 0);
  return Status::Ok();
}

Status LavcEncoder::Init() {
  internal::EnsureFfmpegLogging();
  internal::TakeLastFfmpegLogLine();
  // x264 needs even sizes for 4:2:0; odd ones are padded by repeating the last column/row.
  enc_width_ = png() ? options_.width : (options_.width + 1) & ~1;
  enc_height_ = png() ? options_.height : (options_.height + 1) & ~1;

  const AVCodec* codec = avcodec_find_encoder_by_name(options_.codec.c_str());
  if (codec == nullptr)
    return UnavailableError("this FFmpeg build has no " + options_.codec + " encoder");

  AVFormatContext* oc = nullptr;
  if (avformat_alloc_output_context2(&oc, nullptr, options_.container.c_str(), nullptr) < 0 ||
      oc == nullptr) {
    internal::TakeLastFfmpegLogLine();
    return InvalidArgumentError("EncoderOptions: unknown container '" + options_.container + "'");
  }
  format_.reset(oc);
  // 1: supported, 0: not, negative: the muxer cannot tell (writing the header will).
  if (avformat_query_codec(oc->oformat, codec->id, FF_COMPLIANCE_NORMAL) == 0) {
    return InvalidArgumentError("EncoderOptions: container '" + options_.container +
                                "' cannot hold " + options_.codec);
  }

  codec_.reset(avcodec_alloc_context3(codec));
  if (!codec_) return internal::OutOfMemory(Where());
  AVCodecContext* c = codec_.get();
  REEL_RETURN_IF_ERROR(SetUpCodec(c));
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  int ret = avcodec_open2(c, codec, nullptr);
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": opening the encoder");

  stream_ = avformat_new_stream(oc, nullptr);
  if (stream_ == nullptr) return internal::OutOfMemory(Where());
  ret = avcodec_parameters_from_context(stream_->codecpar, c);
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": stream parameters");
  stream_->time_base = c->time_base;
  stream_->avg_frame_rate = c->framerate;

  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBufferSize));
  if (buffer == nullptr) return internal::OutOfMemory(Where());
  AVIOContext* avio = avio_alloc_context(buffer, kIoBufferSize, /*write_flag=*/1, &out_, nullptr,
                                         &OutputBuffer::Write, &OutputBuffer::Seek);
  if (avio == nullptr) {
    av_free(buffer);
    return internal::OutOfMemory(Where());
  }
  avio_.reset(avio);
  oc->pb = avio;
  oc->flags |= AVFMT_FLAG_CUSTOM_IO;

  ret = avformat_write_header(oc, nullptr);
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": writing the header");
  header_written_ = true;

  packet_ = internal::MakePacket();
  if (!packet_) return internal::OutOfMemory(Where());
  if (png()) return Status::Ok();  // RGB frames go to the encoder as they are: no YUV picture
  yuv_ = internal::MakeFrame();
  if (!yuv_) return internal::OutOfMemory(Where());
  yuv_->format = AV_PIX_FMT_YUV420P;
  yuv_->width = enc_width_;
  yuv_->height = enc_height_;
  ret = av_frame_get_buffer(yuv_.get(), 0);
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": allocating a frame");
  return Status::Ok();
}

Status LavcEncoder::Add(const Frame& frame) {
  if (finished_) return FailedPreconditionError("VideoEncoder::Add after Finish");
  REEL_RETURN_IF_ERROR(CheckInput(frame));
  if (png()) return SendRgb(frame);
  // The encoder may still hold a reference to the previous picture.
  int ret = av_frame_make_writable(yuv_.get());
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": allocating a frame");
  if (frame.format == PixelFormat::kYuv420p) {
    CopyYuv(frame);
  } else {
    REEL_RETURN_IF_ERROR(ConvertRgb(frame));
  }
  PadToEven();
  yuv_->pts = next_pts_++;
  yuv_->color_range = codec_->color_range;
  yuv_->colorspace = codec_->colorspace;
  ret = avcodec_send_frame(codec_.get(), yuv_.get());
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": frame " + std::to_string(next_pts_ - 1));
  return WritePackets();
}

Status LavcEncoder::CheckInput(const Frame& frame) const {
  if (frame.format != options_.input) {
    return InvalidArgumentError(std::string("VideoEncoder::Add: frames must be ") +
                                (options_.input == PixelFormat::kRgb24 ? "RGB24" : "YUV420P"));
  }
  if (frame.width != options_.width || frame.height != options_.height) {
    return InvalidArgumentError("VideoEncoder::Add: frame is " + std::to_string(frame.width) + "x" +
                                std::to_string(frame.height) + ", the encoder expects " +
                                std::to_string(options_.width) + "x" +
                                std::to_string(options_.height));
  }
  REEL_RETURN_IF_ERROR(internal::CheckFrame(frame, "VideoEncoder::Add"));
  if (frame.format == PixelFormat::kYuv420p &&
      (frame.color_matrix != options_.color_matrix || frame.full_range != options_.full_range)) {
    return InvalidArgumentError(
        "VideoEncoder::Add: frame's colour (matrix " + std::to_string(frame.color_matrix) +
        (frame.full_range ? ", full range" : ", limited range") +
        ") is not the encoder's (matrix " + std::to_string(options_.color_matrix) +
        (options_.full_range ? ", full range)" : ", limited range)"));
  }
  return Status::Ok();
}

// The YUV420P frame's planes into the top-left of the (even-sized) picture.
void LavcEncoder::CopyYuv(const Frame& frame) {
  const int chroma_w = (frame.width + 1) / 2, chroma_h = (frame.height + 1) / 2;
  const uint8_t* src[3] = {frame.data.data(),
                           frame.data.data() + static_cast<size_t>(frame.width) * frame.height,
                           nullptr};
  src[2] = src[1] + static_cast<size_t>(chroma_w) * chroma_h;
  const int src_linesize[3] = {frame.width, chroma_w, chroma_w};
  av_image_copy_plane(yuv_->data[0], yuv_->linesize[0], src[0], src_linesize[0], frame.width,
                      frame.height);
  for (int p = 1; p < 3; ++p) {
    av_image_copy_plane(yuv_->data[p], yuv_->linesize[p], src[p], src_linesize[p], chroma_w,
                        chroma_h);
  }
}

// swscale writes the RGB frame's own size into the top-left of the (even-sized) picture.
Status LavcEncoder::ConvertRgb(const Frame& frame) {
  REEL_ASSIGN_OR_RETURN(AVFramePtr rgb, internal::ToAVFrame(frame));
  AVFramePtr view = internal::MakeFrame();
  if (!view) return internal::OutOfMemory(Where());
  view->format = AV_PIX_FMT_YUV420P;
  view->width = options_.width;
  view->height = options_.height;
  for (int p = 0; p < 3; ++p) {
    view->data[p] = yuv_->data[p];
    view->linesize[p] = yuv_->linesize[p];
  }
  return converter_.Convert(rgb.get(), view.get(), SWS_BICUBIC);
}

// Odd sizes repeat their last luma column and row (chroma planes of an odd size already cover
// the even one).
void LavcEncoder::PadToEven() {
  if (enc_width_ > options_.width) {
    for (int y = 0; y < options_.height; ++y) {
      uint8_t* row = yuv_->data[0] + static_cast<ptrdiff_t>(y) * yuv_->linesize[0];
      row[options_.width] = row[options_.width - 1];
    }
  }
  if (enc_height_ > options_.height) {
    std::memcpy(yuv_->data[0] + static_cast<ptrdiff_t>(options_.height) * yuv_->linesize[0],
                yuv_->data[0] + static_cast<ptrdiff_t>(options_.height - 1) * yuv_->linesize[0],
                static_cast<size_t>(enc_width_));
  }
}

// A PNG frame is the RGB picture itself: no conversion.
Status LavcEncoder::SendRgb(const Frame& frame) {
  REEL_ASSIGN_OR_RETURN(AVFramePtr rgb, internal::ToAVFrame(frame));
  rgb->pts = next_pts_++;
  const int ret = avcodec_send_frame(codec_.get(), rgb.get());
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": frame " + std::to_string(next_pts_ - 1));
  return WritePackets();
}

Status LavcEncoder::WritePackets() {
  while (true) {
    int ret = avcodec_receive_packet(codec_.get(), packet_.get());
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return Status::Ok();
    if (ret < 0) return AvErrorToStatus(ret, Where());
    av_packet_rescale_ts(packet_.get(), codec_->time_base, stream_->time_base);
    packet_->stream_index = stream_->index;
    ret = av_interleaved_write_frame(format_.get(), packet_.get());  // takes the reference
    if (ret < 0) return AvErrorToStatus(ret, Where() + ": writing a packet");
  }
}

Result<std::string> LavcEncoder::Finish() {
  if (finished_) return FailedPreconditionError("VideoEncoder::Finish called twice");
  finished_ = true;
  int ret = avcodec_send_frame(codec_.get(), nullptr);
  if (ret < 0 && ret != AVERROR_EOF) return AvErrorToStatus(ret, Where() + ": flushing");
  REEL_RETURN_IF_ERROR(WritePackets());
  ret = av_write_trailer(format_.get());
  if (ret < 0) return AvErrorToStatus(ret, Where() + ": writing the trailer");
  avio_flush(avio_.get());
  return std::move(out_.data);
}

}  // namespace

Result<std::unique_ptr<VideoEncoder>> VideoEncoder::Create(const EncoderOptions& options) {
  REEL_RETURN_IF_ERROR(CheckOptions(options));
  auto encoder = std::make_unique<LavcEncoder>(options);
  REEL_RETURN_IF_ERROR(encoder->Init());
  return std::unique_ptr<VideoEncoder>(std::move(encoder));
}

}  // namespace reel::media
