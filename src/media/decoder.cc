#include "media/decoder.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/clock.h"
#include "media/convert.h"
#include "media/demuxer.h"
#include "media/ffmpeg_util.h"
#include "media/orientation.h"

namespace reel::media {
namespace {

using internal::AVCodecContextPtr;
using internal::AVFramePtr;
using internal::AVPacketPtr;
using internal::Demuxer;
using internal::FrameTable;

std::string PtsText(int64_t pts) {
  return pts == AV_NOPTS_VALUE ? std::string("none") : std::to_string(pts);
}

Status CheckOptions(const DecodeOptions& o) {
  if (o.width < 0 || o.height < 0 || o.short_side < 0 || o.crop_width < 0 || o.crop_height < 0) {
    return InvalidArgumentError("DecodeOptions: sizes must not be negative");
  }
  if ((o.width > 0) != (o.height > 0)) {
    return InvalidArgumentError("DecodeOptions: set both width and height, or neither");
  }
  if (o.width > 0 && o.short_side > 0) {
    return InvalidArgumentError("DecodeOptions: set width/height or short_side, not both");
  }
  if ((o.crop_width > 0) != (o.crop_height > 0)) {
    return InvalidArgumentError("DecodeOptions: set both crop_width and crop_height, or neither");
  }
  if (o.threads < 0) return InvalidArgumentError("DecodeOptions: threads must be >= 0");
  constexpr int kMaxSize = 16384;
  if (o.width > kMaxSize || o.height > kMaxSize || o.short_side > kMaxSize ||
      o.crop_width > kMaxSize || o.crop_height > kMaxSize) {
    return InvalidArgumentError("DecodeOptions: sizes must be at most " + std::to_string(kMaxSize));
  }
  return Status::Ok();
}

// What a libavcodec context is opened from. A context opened for equal parameters, once flushed
// (as every seek flushes it), decodes a new stream as a fresh one would. The reorder delay
// (video_delay: MP4 gives each clip the largest its own frames need) is left out: a context
// keeps the largest it has seen, and a larger delay than a stream needs changes only when
// frames come out, not which.
struct StreamKey {
  std::array<int, 15> fields = {};
  std::string extradata;

  static StreamKey Of(const AVStream* st) {
    const AVCodecParameters* p = st->codecpar;
    StreamKey k;
    k.fields = {p->codec_id,        static_cast<int>(p->codec_tag),
                p->width,           p->height,
                p->format,          p->profile,
                p->level,           p->color_range,
                p->color_primaries, p->color_trc,
                p->color_space,     p->chroma_location,
                p->field_order,     st->time_base.num,
                st->time_base.den};
    if (p->extradata != nullptr) {
      k.extradata.assign(reinterpret_cast<const char*>(p->extradata),
                         static_cast<size_t>(p->extradata_size));
    }
    return k;
  }
  bool operator==(const StreamKey& o) const {
    return fields == o.fields && extradata == o.extradata;
  }
};

// The parts of the last single-threaded decoders this thread closed with
// DecodeOptions::reuse_on_thread, for the next ones it opens on equal stream parameters: a few,
// for datasets whose clips come in a few sizes (short side 112 of 4:3 and 16:9 videos), oldest
// first.
struct SpareDecoder {
  StreamKey key;
  AVCodecContextPtr codec;
  internal::SwsConverter converter;
};
constexpr size_t kSpareDecoders = 4;
thread_local std::vector<SpareDecoder> t_spare_decoders;

class DecoderImpl : public VideoDecoder {
 public:
  DecoderImpl(std::unique_ptr<Demuxer> demuxer, const DecodeOptions& options)
      : demuxer_(std::move(demuxer)), options_(options) {}
  ~DecoderImpl() override { KeepForReuse(); }

  Status Init();

  const VideoInfo& info() const override { return info_; }
  int threads() const override { return codec_->thread_count; }
  int output_width() const override { return out_width_; }
  int output_height() const override { return out_height_; }

  Result<std::vector<Frame>> DecodeFrames(const std::vector<int64_t>& indices) override;
  Result<Frame> DecodeFrame(int64_t index) override {
    REEL_ASSIGN_OR_RETURN(std::vector<Frame> frames, DecodeFrames({index}));
    return std::move(frames[0]);
  }
  Result<std::vector<Frame>> DecodeAt(const std::vector<double>& seconds) override;
  Result<std::optional<Frame>> ReadNext() override;
  Status SeekToFrame(int64_t index) override;
  Status ForEachFrame(const std::function<Status(Frame&&)>& on_frame, int64_t begin,
                      int64_t end) override;
  DecodeStats stats() const override { return stats_; }
  void ResetStats() override { stats_ = DecodeStats{}; }

 private:
  // Decodes up to frame `target` and returns it converted. With `allow_later`, a later frame is
  // returned when `target` cannot be produced (sequential reads with skip_corrupt); nullopt when
  // the video ends first.
  Result<std::optional<Frame>> DecodeTo(int64_t target, bool allow_later);
  Status OpenCodec(const AVCodec* codec, const AVStream* st);
  void KeepForReuse();
  Status Reposition(int64_t packet, bool count);
  bool Unrequested(int64_t packet_index) const;
  int64_t IdentifyFrame(const AVFrame* frame);
  Result<Frame> Convert(const AVFrame* frame, int64_t index);
  std::string FrameName(int64_t index) const;

  std::unique_ptr<Demuxer> demuxer_;
  DecodeOptions options_;
  VideoInfo info_;
  AVCodecContextPtr codec_;
  StreamKey key_;  // with reuse_on_thread
  AVPacketPtr packet_;
  AVFramePtr frame_;
  AVFramePtr scaled_;
  internal::SwsConverter converter_;
  Orientation orientation_;
  int scaled_width_ = 0, scaled_height_ = 0;  // swscale output, before orientation
  int out_width_ = 0, out_height_ = 0;
  AVPixelFormat out_av_format_ = AV_PIX_FMT_NONE;
  int sws_flags_ = 0;

  // Where decoding stands. positioned_: the decoder has been fed every packet from a keyframe (or
  // the start) up to next_packet_ - 1 without a gap, so any later frame is reachable forward.
  bool positioned_ = false;
  int64_t next_packet_ = 0;
  int64_t last_output_ = -1;  // presentation index of the last frame the decoder produced
  int64_t counted_ = 0;       // counting mode: frames produced since the start
  bool drained_ = false;      // end of stream sent; needs a seek (flush) before more
  int64_t cursor_ = 0;        // ReadNext
  // The frames the running DecodeFrames was asked for, sorted; empty between calls.
  std::vector<int64_t> requested_;
  DecodeStats stats_;
};

Status DecoderImpl::Init() {
  const std::string& name = demuxer_->input().name();
  REEL_RETURN_IF_ERROR(demuxer_->Scan());
  info_ = demuxer_->Describe();
  AVStream* st = demuxer_->stream();

  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (codec == nullptr) {
    return UnimplementedError(name + ": this FFmpeg build has no decoder for codec '" +
                              info_.codec + "'");
  }
  REEL_RETURN_IF_ERROR(OpenCodec(codec, st));
  packet_ = internal::MakePacket();
  frame_ = internal::MakeFrame();
  scaled_ = internal::MakeFrame();
  if (!packet_ || !frame_ || !scaled_) return internal::OutOfMemory(name);

  if (info_.width <= 0 || info_.height <= 0) {
    return DataLossError(name + ": the video stream has no frame size");
  }
  // Output geometry: resize in display orientation, then map back to stored orientation for
  // swscale; orientation and crop are applied after scaling.
  if (options_.autorotate) orientation_ = internal::StreamOrientation(st).orientation;
  int display_w = orientation_.transpose ? info_.height : info_.width;
  int display_h = orientation_.transpose ? info_.width : info_.height;
  int resized_w = display_w, resized_h = display_h;
  if (options_.width > 0) {
    resized_w = options_.width;
    resized_h = options_.height;
  } else if (options_.short_side > 0) {
    std::tie(resized_w, resized_h) = ShortSideSize(display_w, display_h, options_.short_side);
  }
  scaled_width_ = orientation_.transpose ? resized_h : resized_w;
  scaled_height_ = orientation_.transpose ? resized_w : resized_h;
  out_width_ = resized_w;
  out_height_ = resized_h;
  if (options_.crop_width > 0) {
    if (options_.crop_width > resized_w || options_.crop_height > resized_h) {
      return InvalidArgumentError(name + ": crop " + std::to_string(options_.crop_width) + "x" +
                                  std::to_string(options_.crop_height) +
                                  " is larger than the frame (" + std::to_string(resized_w) + "x" +
                                  std::to_string(resized_h) + ")");
    }
    out_width_ = options_.crop_width;
    out_height_ = options_.crop_height;
  }
  out_av_format_ = internal::ToAVPixelFormat(options_.format);
  // Same-size conversions use bicubic like the ffmpeg command line (it only matters for chroma
  // upsampling); resizes use the requested interpolation.
  bool resizing = scaled_width_ != info_.width || scaled_height_ != info_.height;
  sws_flags_ = internal::SwsFlags(resizing ? options_.interpolation : Interpolation::kBicubic);

  // Position at the first packet (not counted as a seek).
  if (info_.frame_count > 0) REEL_RETURN_IF_ERROR(Reposition(0, /*count=*/false));
  return Status::Ok();
}

Status DecoderImpl::OpenCodec(const AVCodec* codec, const AVStream* st) {
  const std::string& name = demuxer_->input().name();
  const bool small =
      static_cast<int64_t>(info_.width) * info_.height < options_.frame_threads_min_pixels;
  const int threads = small ? 1 : options_.threads;
  if (options_.reuse_on_thread && threads == 1) {
    key_ = StreamKey::Of(st);
    auto& spares = t_spare_decoders;
    const auto spare = std::find_if(spares.rbegin(), spares.rend(),
                                    [&](const SpareDecoder& d) { return d.key == key_; });
    if (spare != spares.rend()) {
      codec_ = std::move(spare->codec);
      codec_->has_b_frames = std::max(codec_->has_b_frames, st->codecpar->video_delay);
      converter_ = std::move(spare->converter);
      spares.erase(std::next(spare).base());
      stats_.decoder_reused = true;
      return Status::Ok();
    }
  }
  codec_.reset(avcodec_alloc_context3(codec));
  if (!codec_) return internal::OutOfMemory(name);
  int ret = avcodec_parameters_to_context(codec_.get(), st->codecpar);
  if (ret < 0) return internal::AvErrorToStatus(ret, name + ": decoder parameters");
  codec_->pkt_timebase = st->time_base;
  codec_->thread_count = threads;
  codec_->thread_type = FF_THREAD_FRAME;
  ret = avcodec_open2(codec_.get(), codec, nullptr);
  if (ret < 0) {
    codec_.reset();
    return internal::AvErrorToStatus(ret, name + ": opening the " + info_.codec + " decoder");
  }
  return Status::Ok();
}

void DecoderImpl::KeepForReuse() {
  if (!options_.reuse_on_thread || !codec_ || codec_->thread_count != 1) return;
  avcodec_flush_buffers(codec_.get());  // drops its frames and any end-of-stream state
  codec_->skip_frame = AVDISCARD_DEFAULT;
  auto& spares = t_spare_decoders;
  if (spares.size() == kSpareDecoders) spares.erase(spares.begin());
  spares.push_back(SpareDecoder{std::move(key_), std::move(codec_), std::move(converter_)});
}

std::string DecoderImpl::FrameName(int64_t index) const {
  std::string s = demuxer_->input().name() + ": frame " + std::to_string(index);
  if (index >= 0 && index < static_cast<int64_t>(info_.frame_pts.size())) {
    s += " (pts " + std::to_string(info_.frame_pts[index]) + ")";
  }
  return s;
}

Status DecoderImpl::Reposition(int64_t packet, bool count) {
  positioned_ = false;
  REEL_ASSIGN_OR_RETURN(int64_t landed, demuxer_->SeekToPacket(packet));
  avcodec_flush_buffers(codec_.get());
  if (count) {
    ++stats_.seeks;
    if (landed <= stats_.max_packet_index) ++stats_.backward_seeks;
  }
  positioned_ = true;
  next_packet_ = landed;
  last_output_ = -1;
  counted_ = 0;
  drained_ = false;
  return Status::Ok();
}

// Whether the packet's frame may be dropped if nothing refers to it: DecodeFrames is running,
// and the frame is not requested but lies before the last frame that is. Frames after it may be
// the next call's (the decoder reads a few packets ahead of the frame it returns).
bool DecoderImpl::Unrequested(int64_t packet_index) const {
  const FrameTable& t = demuxer_->table();
  if (!options_.skip_unrequested || !t.timestamp_mode || requested_.empty() || packet_index < 0) {
    return false;
  }
  const int64_t frame = t.packets[packet_index].frame;
  return frame >= 0 && frame < requested_.back() &&
         !std::binary_search(requested_.begin(), requested_.end(), frame);
}

int64_t DecoderImpl::IdentifyFrame(const AVFrame* frame) {
  const FrameTable& t = demuxer_->table();
  if (!t.timestamp_mode) return counted_++;
  int64_t ts = frame->pts != AV_NOPTS_VALUE ? frame->pts : frame->best_effort_timestamp;
  if (ts == AV_NOPTS_VALUE) return -1;
  auto it = std::lower_bound(t.frame_ts.begin(), t.frame_ts.end(), ts);
  if (it == t.frame_ts.end() || *it != ts) return -1;
  return it - t.frame_ts.begin();
}

Result<Frame> DecoderImpl::Convert(const AVFrame* src, int64_t index) {
  auto src_format = static_cast<AVPixelFormat>(src->format);
  bool same_format = src_format == out_av_format_ || (options_.format == PixelFormat::kYuv420p &&
                                                      src_format == AV_PIX_FMT_YUVJ420P);
  Frame out;
  if (same_format && src->width == scaled_width_ && src->height == scaled_height_) {
    REEL_ASSIGN_OR_RETURN(out, internal::FromAVFrame(src, options_.format));
  } else {
    if (scaled_->data[0] == nullptr) {
      scaled_->format = out_av_format_;
      scaled_->width = scaled_width_;
      scaled_->height = scaled_height_;
    }
    Status s = converter_.Convert(src, scaled_.get(), sws_flags_);
    if (!s.ok()) return s.WithContext(FrameName(index));
    REEL_ASSIGN_OR_RETURN(out, internal::FromAVFrame(scaled_.get(), options_.format));
  }
  if (!orientation_.identity()) out = Orient(out, orientation_);
  if (options_.crop_width > 0) {
    REEL_ASSIGN_OR_RETURN(out, CenterCrop(out, options_.crop_width, options_.crop_height));
  }
  out.index = index;
  out.timestamp_s = info_.FrameTime(index);
  return out;
}

Result<std::optional<Frame>> DecoderImpl::DecodeTo(int64_t target, bool allow_later) {
  const FrameTable& t = demuxer_->table();
  const std::string& name = demuxer_->input().name();
  int64_t start = t.timestamp_mode ? t.start_packet[target] : 0;
  bool need_seek = !positioned_ || drained_ || target <= last_output_ ||
                   (t.timestamp_mode && start > next_packet_);
  if (need_seek) REEL_RETURN_IF_ERROR(Reposition(start, /*count=*/true));

  while (true) {
    int ret = avcodec_receive_frame(codec_.get(), frame_.get());
    if (ret == 0) {
      ++stats_.frames_decoded;
      int64_t index = IdentifyFrame(frame_.get());
      bool corrupt = frame_->decode_error_flags != 0 || (frame_->flags & AV_FRAME_FLAG_CORRUPT);
      if (index < 0) {
        av_frame_unref(frame_.get());
        continue;
      }
      last_output_ = index;
      if (index < target) {
        av_frame_unref(frame_.get());
        continue;
      }
      if (index > target && !allow_later) {
        positioned_ = false;
        av_frame_unref(frame_.get());
        return DataLossError(FrameName(target) +
                             ": the decoder did not produce this frame (frame " +
                             std::to_string(index) + " came next); the video is corrupt");
      }
      if (corrupt && !options_.skip_corrupt) {
        positioned_ = false;
        av_frame_unref(frame_.get());
        return DataLossError(FrameName(index) + ": the decoder flagged the frame as corrupt");
      }
      const auto convert_start = std::chrono::steady_clock::now();
      Result<Frame> converted = Convert(frame_.get(), index);
      stats_.convert_s += SecondsSince(convert_start);
      av_frame_unref(frame_.get());
      if (!converted.ok()) return converted.status();
      ++stats_.frames_returned;
      return std::optional<Frame>(std::move(converted).value());
    }
    if (ret == AVERROR_EOF) {
      drained_ = true;
      if (allow_later) return std::optional<Frame>();
      return DataLossError(FrameName(target) +
                           ": the decoder reached the end of the video without producing this "
                           "frame; the video is corrupt or truncated");
    }
    if (ret != AVERROR(EAGAIN)) {
      // With frame threading, a corrupt packet is reported here, a little later.
      if (ret == AVERROR_INVALIDDATA && options_.skip_corrupt && allow_later) {
        ++stats_.corrupt_packets;
        internal::TakeLastFfmpegLogLine();
        continue;
      }
      positioned_ = false;
      return internal::AvErrorToStatus(ret, FrameName(target) + ": decoding");
    }
    // The decoder wants input.
    int64_t packet_index = -1;
    Result<bool> got = demuxer_->ReadVideoPacket(packet_.get(), &packet_index);
    if (!got.ok()) {
      positioned_ = false;
      return got.status().WithContext("decoding frame " + std::to_string(target));
    }
    if (!*got) {
      ret = avcodec_send_packet(codec_.get(), nullptr);
      if (ret < 0 && ret != AVERROR_EOF) {
        positioned_ = false;
        return internal::AvErrorToStatus(ret, name + ": draining the decoder");
      }
      continue;
    }
    next_packet_ = packet_index >= 0 ? packet_index + 1 : next_packet_ + 1;
    ++stats_.packets_read;
    stats_.max_packet_index = std::max(stats_.max_packet_index, next_packet_ - 1);
    // Read per packet, by frame threads too (FFmpeg copies it with each packet it hands out).
    codec_->skip_frame = Unrequested(packet_index) ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
    ret = avcodec_send_packet(codec_.get(), packet_.get());
    int64_t pts = packet_->pts;
    av_packet_unref(packet_.get());
    if (ret == AVERROR(EAGAIN)) {
      // Cannot happen: input is only sent after the decoder asked for it.
      positioned_ = false;
      return InternalError(name + ": the decoder refused input it asked for");
    }
    if (ret < 0) {
      ++stats_.corrupt_packets;
      if (ret == AVERROR_INVALIDDATA && options_.skip_corrupt && allow_later) {
        internal::TakeLastFfmpegLogLine();
        continue;
      }
      positioned_ = false;
      std::string where = name + ": packet " + std::to_string(next_packet_ - 1);
      if (packet_index >= 0 && t.packets[packet_index].frame >= 0) {
        where += " (frame " + std::to_string(t.packets[packet_index].frame) + ", pts " +
                 PtsText(pts) + ")";
      } else {
        where += " (pts " + PtsText(pts) + ")";
      }
      where += " cannot be decoded (reading towards frame " + std::to_string(target) + ")";
      return internal::AvErrorToStatus(ret, where);
    }
  }
}

Result<std::vector<Frame>> DecoderImpl::DecodeFrames(const std::vector<int64_t>& indices) {
  for (int64_t i : indices) {
    if (i < 0 || i >= info_.frame_count) {
      return InvalidArgumentError(demuxer_->input().name() + ": frame " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(info_.frame_count) + ")");
    }
  }
  std::vector<int64_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());

  std::map<int64_t, Frame> decoded;
  requested_ = sorted;
  for (int64_t target : sorted) {
    Result<std::optional<Frame>> frame = DecodeTo(target, /*allow_later=*/false);
    if (!frame.ok()) requested_.clear();
    REEL_RETURN_IF_ERROR(frame.status());
    REEL_CHECK(frame->has_value()) << "DecodeTo without allow_later returned no frame";
    decoded.emplace(target, std::move(**frame));
  }
  requested_.clear();
  if (!sorted.empty()) cursor_ = sorted.back() + 1;

  // In request order; the last use of each frame moves it.
  std::map<int64_t, size_t> remaining;
  for (int64_t i : indices) ++remaining[i];
  std::vector<Frame> out;
  out.reserve(indices.size());
  for (int64_t i : indices) {
    Frame& f = decoded[i];
    if (--remaining[i] == 0) {
      out.push_back(std::move(f));
    } else {
      out.push_back(f);
    }
  }
  return out;
}

Result<std::vector<Frame>> DecoderImpl::DecodeAt(const std::vector<double>& seconds) {
  std::vector<int64_t> indices;
  indices.reserve(seconds.size());
  for (double s : seconds) {
    int64_t i = info_.NearestFrame(s);
    if (i < 0) {
      return OutOfRangeError(demuxer_->input().name() + ": time " + std::to_string(s) +
                             " s is outside the video [0, " + std::to_string(info_.duration_s) +
                             "] s");
    }
    indices.push_back(i);
  }
  return DecodeFrames(indices);
}

Result<std::optional<Frame>> DecoderImpl::ReadNext() {
  if (cursor_ >= info_.frame_count) return std::optional<Frame>();
  REEL_ASSIGN_OR_RETURN(std::optional<Frame> frame,
                        DecodeTo(cursor_, /*allow_later=*/options_.skip_corrupt));
  cursor_ = frame ? frame->index + 1 : info_.frame_count;
  return frame;
}

Status DecoderImpl::SeekToFrame(int64_t index) {
  if (index < 0 || index > info_.frame_count) {
    return InvalidArgumentError(demuxer_->input().name() + ": frame " + std::to_string(index) +
                                " is outside [0, " + std::to_string(info_.frame_count) + "]");
  }
  cursor_ = index;
  return Status::Ok();
}

Status DecoderImpl::ForEachFrame(const std::function<Status(Frame&&)>& on_frame, int64_t begin,
                                 int64_t end) {
  if (end < 0 || end > info_.frame_count) end = info_.frame_count;
  REEL_RETURN_IF_ERROR(SeekToFrame(begin));
  while (cursor_ < end) {
    REEL_ASSIGN_OR_RETURN(std::optional<Frame> frame, ReadNext());
    if (!frame || frame->index >= end) break;
    REEL_RETURN_IF_ERROR(on_frame(std::move(*frame)));
  }
  return Status::Ok();
}

}  // namespace

DecodeOptions OwnClipOptions() {
  DecodeOptions options;
  options.format = PixelFormat::kRgb24;
  options.threads = 1;
  options.container = "mp4";
  options.analyze_streams = false;
  options.parse_packets = false;
  options.reuse_on_thread = true;
  return options;
}

Result<std::unique_ptr<VideoDecoder>> VideoDecoder::Open(const Input& input,
                                                         const DecodeOptions& options) {
  REEL_RETURN_IF_ERROR(CheckOptions(options));
  REEL_ASSIGN_OR_RETURN(
      std::unique_ptr<Demuxer> demuxer,
      Demuxer::Open(input, options.stream_index,
                    {options.container, options.analyze_streams, options.parse_packets}));
  auto decoder = std::make_unique<DecoderImpl>(std::move(demuxer), options);
  REEL_RETURN_IF_ERROR(decoder->Init());
  return std::unique_ptr<VideoDecoder>(std::move(decoder));
}

}  // namespace reel::media
