#include "media/demuxer.h"

extern "C" {
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <utility>

#include "media/orientation.h"

namespace reel::media::internal {
namespace {

constexpr int kMemoryBufferSize = 64 * 1024;

int64_t SeekTimestamp(const PacketEntry& p) {
  if (p.pts == AV_NOPTS_VALUE) return p.dts;
  if (p.dts == AV_NOPTS_VALUE) return p.pts;
  return std::min(p.pts, p.dts);
}

}  // namespace

int Demuxer::MemoryReader::Read(void* opaque, uint8_t* buffer, int n) {
  auto* r = static_cast<MemoryReader*>(opaque);
  if (r->pos >= r->size) return AVERROR_EOF;
  int64_t take = std::min<int64_t>(n, r->size - r->pos);
  std::memcpy(buffer, r->data + r->pos, static_cast<size_t>(take));
  r->pos += take;
  return static_cast<int>(take);
}

int64_t Demuxer::MemoryReader::Seek(void* opaque, int64_t offset, int whence) {
  auto* r = static_cast<MemoryReader*>(opaque);
  whence &= ~AVSEEK_FORCE;
  int64_t target;
  switch (whence) {
    case AVSEEK_SIZE:
      return r->size;
    case SEEK_SET:
      target = offset;
      break;
    case SEEK_CUR:
      target = r->pos + offset;
      break;
    case SEEK_END:
      target = r->size + offset;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (target < 0 || target > r->size) return AVERROR(EINVAL);
  r->pos = target;
  return target;
}

Demuxer::~Demuxer() {
  // Members are destroyed in reverse order: pending_, format_ (closes the demuxer), avio_, reader_.
}

Result<std::unique_ptr<Demuxer>> Demuxer::Open(const Input& input, int stream_index,
                                               const ContainerHints& hints) {
  EnsureFfmpegLogging();
  TakeLastFfmpegLogLine();  // forget lines logged before this call on this thread
  std::unique_ptr<Demuxer> d(new Demuxer(input, hints));
  REEL_RETURN_IF_ERROR(d->OpenFormat());
  AVFormatContext* fmt = d->format_.get();
  const std::string& name = input.name();
  if (stream_index >= 0) {
    if (stream_index >= static_cast<int>(fmt->nb_streams) ||
        fmt->streams[stream_index]->codecpar->codec_type != AVMEDIA_TYPE_VIDEO) {
      return InvalidArgumentError(name + ": stream " + std::to_string(stream_index) +
                                  " is not a video stream");
    }
    d->stream_index_ = stream_index;
  } else {
    int best = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (best >= 0 && (fmt->streams[best]->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0) {
      d->stream_index_ = best;
    } else {
      for (unsigned i = 0; i < fmt->nb_streams; ++i) {
        const AVStream* st = fmt->streams[i];
        if (st->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            (st->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0) {
          d->stream_index_ = static_cast<int>(i);
          break;
        }
      }
    }
    if (d->stream_index_ < 0) return InvalidArgumentError(name + ": has no video stream");
  }
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) d->has_audio_ = true;
    if (static_cast<int>(i) != d->stream_index_) fmt->streams[i]->discard = AVDISCARD_ALL;
  }
  d->pending_ = MakePacket();
  if (!d->pending_) return OutOfMemory(name);
  return d;
}

Status Demuxer::OpenFormat() {
  const std::string& name = input_.name();
  format_.reset();  // before the AVIOContext it reads from
  avio_.reset();
  reader_.reset();
  const AVInputFormat* format = nullptr;
  if (!hints_.format.empty()) {
    format = av_find_input_format(hints_.format.c_str());
    if (format == nullptr) {
      return InvalidArgumentError(name + ": this FFmpeg build has no demuxer for container '" +
                                  hints_.format + "'");
    }
  }
  AVFormatContext* raw = avformat_alloc_context();
  if (raw == nullptr) return OutOfMemory(name);
  if (!input_.is_file()) {
    reader_ = std::make_unique<MemoryReader>();
    reader_->data = reinterpret_cast<const uint8_t*>(input_.bytes().data());
    reader_->size = static_cast<int64_t>(input_.bytes().size());
    auto* buffer = static_cast<unsigned char*>(av_malloc(kMemoryBufferSize));
    if (buffer == nullptr) {
      avformat_free_context(raw);
      return OutOfMemory(name);
    }
    AVIOContext* avio =
        avio_alloc_context(buffer, kMemoryBufferSize, /*write_flag=*/0, reader_.get(),
                           &MemoryReader::Read, nullptr, &MemoryReader::Seek);
    if (avio == nullptr) {
      av_free(buffer);
      avformat_free_context(raw);
      return OutOfMemory(name);
    }
    avio_.reset(avio);
    raw->pb = avio;
    raw->flags |= AVFMT_FLAG_CUSTOM_IO;
  }
  // Packets as the index lists them, without a parser reading their headers (nor filling in
  // timestamps, which a complete index has).
  if (!hints_.parse_packets) raw->flags |= AVFMT_FLAG_NOPARSE | AVFMT_FLAG_NOFILLIN;
  // On failure avformat_open_input frees `raw` (not a custom pb).
  int ret = avformat_open_input(&raw, name.c_str(), format, nullptr);
  if (ret < 0) return AvErrorToStatus(ret, name + ": opening");
  format_.reset(raw);
  if (!hints_.analyze_streams) return Status::Ok();
  ret = avformat_find_stream_info(raw, nullptr);
  if (ret < 0) return AvErrorToStatus(ret, name + ": reading stream information");
  return Status::Ok();
}

Result<int64_t> Demuxer::Reopen() {
  av_packet_unref(pending_.get());
  has_pending_ = false;
  Status s = OpenFormat();
  if (!s.ok()) return s.WithContext("rewinding by reopening");
  if (stream_index_ >= static_cast<int>(format_->nb_streams)) {
    return InternalError(input_.name() + ": the video stream is gone after reopening");
  }
  for (unsigned i = 0; i < format_->nb_streams; ++i) {
    if (static_cast<int>(i) != stream_index_) format_->streams[i]->discard = AVDISCARD_ALL;
  }
  return Peek();
}

Status Demuxer::Scan() {
  const std::string& name = input_.name();
  AVPacketPtr packet = MakePacket();
  if (!packet) return OutOfMemory(name);
  std::vector<PacketEntry> packets;
  while (true) {
    int ret = av_read_frame(format_.get(), packet.get());
    if (ret == AVERROR_EOF) break;
    if (ret < 0) {
      return AvErrorToStatus(ret, name + ": reading packet " + std::to_string(packets.size()) +
                                      " of the video stream");
    }
    if (packet->stream_index == stream_index_) {
      PacketEntry e;
      e.pts = packet->pts;
      e.dts = packet->dts;
      e.pos = packet->pos;
      e.duration = packet->duration;
      e.key = (packet->flags & AV_PKT_FLAG_KEY) != 0;
      e.discard = (packet->flags & AV_PKT_FLAG_DISCARD) != 0;
      packets.push_back(e);
    }
    av_packet_unref(packet.get());
  }
  has_pending_ = false;

  FrameTable t;
  t.packets = std::move(packets);
  std::vector<int64_t> shown;  // packet indices that are frames, file order
  for (size_t i = 0; i < t.packets.size(); ++i) {
    if (!t.packets[i].discard) shown.push_back(static_cast<int64_t>(i));
  }
  t.timestamp_mode = !shown.empty();
  for (int64_t i : shown) {
    if (t.packets[i].pts == AV_NOPTS_VALUE) t.timestamp_mode = false;
  }
  if (t.timestamp_mode) {
    std::vector<int64_t> order = shown;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return t.packets[a].pts < t.packets[b].pts; });
    for (size_t i = 1; i < order.size(); ++i) {
      if (t.packets[order[i]].pts == t.packets[order[i - 1]].pts) t.timestamp_mode = false;
    }
    if (t.timestamp_mode) {
      for (int64_t p : order) {
        t.packets[p].frame = static_cast<int64_t>(t.frame_ts.size());
        t.frame_ts.push_back(t.packets[p].pts);
        t.frame_packet.push_back(p);
      }
    }
  }
  if (!t.timestamp_mode) {
    // Counting mode: frames come out in file order of their packets; times from dts when they
    // increase, else synthesised from the frame rate.
    bool dts_usable = true;
    for (size_t i = 0; i < shown.size(); ++i) {
      int64_t dts = t.packets[shown[i]].dts;
      if (dts == AV_NOPTS_VALUE || (i > 0 && dts <= t.packets[shown[i - 1]].dts)) {
        dts_usable = false;
      }
    }
    int64_t step = 1;
    const AVStream* st = stream();
    AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    if (rate.num > 0 && rate.den > 0) {
      step = std::max<int64_t>(1, av_rescale_q(1, av_inv_q(rate), st->time_base));
    }
    t.frame_ts.clear();
    t.frame_packet.clear();
    for (size_t i = 0; i < shown.size(); ++i) {
      t.packets[shown[i]].frame = static_cast<int64_t>(i);
      t.frame_ts.push_back(dts_usable ? t.packets[shown[i]].dts : static_cast<int64_t>(i) * step);
      t.frame_packet.push_back(shown[i]);
    }
  }

  // Where to start decoding for each frame: the last keyframe packet at or before the frame's
  // packet in file order whose timestamp is not after the frame's (so that open-GOP leading
  // pictures start from the previous keyframe).
  t.start_packet.assign(t.frame_ts.size(), 0);
  if (t.timestamp_mode) {
    std::vector<int64_t> keys;
    for (size_t i = 0; i < t.packets.size(); ++i) {
      if (t.packets[i].key) keys.push_back(static_cast<int64_t>(i));
    }
    for (size_t f = 0; f < t.frame_ts.size(); ++f) {
      int64_t p = t.frame_packet[f];
      auto it = std::upper_bound(keys.begin(), keys.end(), p);
      int64_t start = 0;
      while (it != keys.begin()) {
        --it;
        const PacketEntry& k = t.packets[*it];
        int64_t kts = k.pts != AV_NOPTS_VALUE ? k.pts : k.dts;
        if (kts == AV_NOPTS_VALUE || kts <= t.frame_ts[f]) {
          start = *it;
          break;
        }
      }
      t.start_packet[f] = start;
    }
  }

  by_pos_.clear();
  by_ts_.clear();
  positions_unique_ = true;
  for (size_t i = 0; i < t.packets.size() && positions_unique_; ++i) {
    int64_t pos = t.packets[i].pos;
    if (pos < 0 || !by_pos_.emplace(pos, static_cast<int64_t>(i)).second) positions_unique_ = false;
  }
  if (!positions_unique_) {
    by_pos_.clear();
    for (size_t i = 0; i < t.packets.size(); ++i) {
      by_ts_.emplace(std::make_pair(t.packets[i].dts, t.packets[i].pts), static_cast<int64_t>(i));
    }
  }
  table_ = std::move(t);
  scanned_ = true;
  return Status::Ok();
}

int64_t Demuxer::Identify(const AVPacket* packet) const {
  if (!scanned_) return -1;
  if (positions_unique_ && packet->pos >= 0) {
    auto it = by_pos_.find(packet->pos);
    return it == by_pos_.end() ? -1 : it->second;
  }
  // Without unique positions: the first packet with the same timestamps.
  auto it = by_ts_.find(std::make_pair(packet->dts, packet->pts));
  return it == by_ts_.end() ? -1 : it->second;
}

Result<bool> Demuxer::ReadVideoPacket(AVPacket* packet, int64_t* index) {
  av_packet_unref(packet);
  if (has_pending_) {
    av_packet_move_ref(packet, pending_.get());
    has_pending_ = false;
    *index = Identify(packet);
    return true;
  }
  while (true) {
    int ret = av_read_frame(format_.get(), packet);
    if (ret == AVERROR_EOF) return false;
    if (ret < 0) return AvErrorToStatus(ret, input_.name() + ": reading a packet");
    if (packet->stream_index == stream_index_) {
      *index = Identify(packet);
      return true;
    }
    av_packet_unref(packet);
  }
}

Result<int64_t> Demuxer::Peek() {
  av_packet_unref(pending_.get());
  has_pending_ = false;
  int64_t index = -1;
  AVPacketPtr packet = MakePacket();
  if (!packet) return OutOfMemory(input_.name());
  REEL_ASSIGN_OR_RETURN(bool got, ReadVideoPacket(packet.get(), &index));
  if (!got) return static_cast<int64_t>(-1);
  av_packet_move_ref(pending_.get(), packet.get());
  has_pending_ = true;
  return index;
}

Result<int64_t> Demuxer::TrySeek(int64_t ts, int flags, bool use_seek_file) {
  av_packet_unref(pending_.get());
  has_pending_ = false;
  int ret;
  if (use_seek_file) {
    ret = avformat_seek_file(format_.get(), stream_index_, INT64_MIN, ts, ts, flags);
  } else {
    ret = av_seek_frame(format_.get(), stream_index_, ts, flags);
  }
  if (ret < 0) {
    TakeLastFfmpegLogLine();
    return static_cast<int64_t>(-1);
  }
  return Peek();
}

Result<int64_t> Demuxer::SeekToPacket(int64_t target) {
  const auto& packets = table_.packets;
  if (!scanned_ || target < 0 || target >= static_cast<int64_t>(packets.size())) {
    return InternalError(input_.name() + ": seek to packet " + std::to_string(target) +
                         " outside the table");
  }
  if (!table_.timestamp_mode) target = 0;
  auto acceptable = [&](int64_t landed, int64_t goal) {
    if (landed < 0 || landed > goal) return false;
    if (!table_.timestamp_mode) return landed == 0;
    return landed == 0 || packets[landed].key;
  };

  // The target first, then up to three earlier keyframes, then the start of the stream. For
  // each, the packet's pts and then its dts: demuxers disagree on which timeline a seek uses
  // (MOV takes a pts and maps it to its dts index; AVI's index is in dts). An exact landing
  // wins at once; an earlier keyframe is kept as a fallback.
  std::vector<int64_t> attempts = {target};
  for (int64_t i = target - 1; i > 0 && attempts.size() < 4; --i) {
    if (packets[i].key) attempts.push_back(i);
  }
  if (attempts.back() != 0) attempts.push_back(0);

  struct Try {
    int64_t ts;
    int flags;
    bool seek_file;
  };
  for (int64_t goal : attempts) {
    const PacketEntry& p = packets[goal];
    std::vector<Try> tries;
    if (p.pts != AV_NOPTS_VALUE) tries.push_back({p.pts, AVSEEK_FLAG_BACKWARD, false});
    if (p.dts != AV_NOPTS_VALUE && p.dts != p.pts) {
      tries.push_back({p.dts, AVSEEK_FLAG_BACKWARD, false});
    }
    if (goal == 0) {
      int64_t ts = SeekTimestamp(p);
      if (ts != AV_NOPTS_VALUE) tries.push_back({ts, 0, true});
      if (p.pos >= 0 && (format_->iformat->flags & AVFMT_NO_BYTE_SEEK) == 0) {
        tries.push_back({p.pos, AVSEEK_FLAG_BYTE | AVSEEK_FLAG_BACKWARD, false});
      }
    }
    const Try* fallback = nullptr;
    for (const Try& t : tries) {
      REEL_ASSIGN_OR_RETURN(int64_t landed, TrySeek(t.ts, t.flags, t.seek_file));
      if (landed == goal && acceptable(landed, goal)) return landed;
      if (fallback == nullptr && acceptable(landed, goal)) fallback = &t;
    }
    if (fallback != nullptr) {
      REEL_ASSIGN_OR_RETURN(int64_t landed,
                            TrySeek(fallback->ts, fallback->flags, fallback->seek_file));
      if (acceptable(landed, goal)) return landed;
    }
  }
  // Last resort for containers that cannot seek back: open them again, at packet 0.
  REEL_ASSIGN_OR_RETURN(int64_t landed, Reopen());
  if (acceptable(landed, 0)) return landed;
  return InternalError(input_.name() + ": the container cannot seek back to packet " +
                       std::to_string(target) + " (frame-accurate decoding impossible)");
}

VideoInfo Demuxer::Describe() const {
  const AVStream* st = stream();
  const AVCodecParameters* par = st->codecpar;
  VideoInfo info;
  info.name = input_.name();
  info.container = format_->iformat->name;
  info.stream_index = stream_index_;
  info.codec = avcodec_get_name(par->codec_id);
  if (const char* fmt = av_get_pix_fmt_name(static_cast<AVPixelFormat>(par->format))) {
    info.pixel_format = fmt;
  }
  info.bit_rate = par->bit_rate;
  info.has_audio = has_audio_;
  info.width = par->width;
  info.height = par->height;

  OrientationInfo o = StreamOrientation(st);
  info.rotation = o.rotation;
  info.mirrored = o.mirrored;
  info.display_width = o.orientation.transpose ? par->height : par->width;
  info.display_height = o.orientation.transpose ? par->width : par->height;
  AVRational sar =
      par->sample_aspect_ratio.num > 0 ? par->sample_aspect_ratio : st->sample_aspect_ratio;
  if (sar.num > 0 && sar.den > 0) info.sample_aspect_ratio = {sar.num, sar.den};

  info.time_base = {st->time_base.num, st->time_base.den};
  const double tb = av_q2d(st->time_base);
  if (st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0) {
    info.frame_rate = {st->avg_frame_rate.num, st->avg_frame_rate.den};
  }
  info.container_frame_count = st->nb_frames > 0 ? st->nb_frames : -1;

  if (!scanned_) {
    if (info.frame_rate.num == 0 && st->r_frame_rate.num > 0 && st->r_frame_rate.den > 0) {
      info.frame_rate = {st->r_frame_rate.num, st->r_frame_rate.den};
    }
    info.variable_frame_rate = st->avg_frame_rate.num > 0 && st->r_frame_rate.num > 0 &&
                               av_cmp_q(st->avg_frame_rate, st->r_frame_rate) != 0;
    info.frame_count = info.container_frame_count;
    if (st->start_time != AV_NOPTS_VALUE) info.start_time_s = st->start_time * tb;
    if (st->duration != AV_NOPTS_VALUE && st->duration > 0) {
      info.duration_s = st->duration * tb;
    } else if (format_->duration != AV_NOPTS_VALUE && format_->duration > 0) {
      info.duration_s = static_cast<double>(format_->duration) / AV_TIME_BASE;
    }
    return info;
  }

  const FrameTable& t = table_;
  info.scanned = true;
  info.frame_count = static_cast<int64_t>(t.frame_ts.size());
  info.frame_pts = t.frame_ts;
  info.has_presentation_timestamps = t.timestamp_mode;
  for (size_t f = 0; f < t.frame_packet.size(); ++f) {
    if (t.packets[t.frame_packet[f]].key) info.keyframes.push_back(static_cast<int64_t>(f));
  }
  const size_t n = t.frame_ts.size();
  if (n == 0) return info;

  // Frame durations: deltas between presentation times; the last frame lasts its packet's
  // duration, else the median delta.
  std::vector<int64_t> deltas;
  for (size_t i = 1; i < n; ++i) deltas.push_back(t.frame_ts[i] - t.frame_ts[i - 1]);
  int64_t median = 0;
  if (!deltas.empty()) {
    std::vector<int64_t> sorted = deltas;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    median = sorted[sorted.size() / 2];
    int64_t tolerance = std::max<int64_t>(1, median / 100);
    for (int64_t d : deltas) {
      if (std::llabs(d - median) > tolerance) info.variable_frame_rate = true;
    }
  }
  int64_t last = t.packets[t.frame_packet[n - 1]].duration;
  if (last <= 0) last = median;
  info.start_time_s = t.frame_ts[0] * tb;
  info.duration_s = static_cast<double>(t.frame_ts[n - 1] + last - t.frame_ts[0]) * tb;
  if (info.frame_rate.num == 0 && info.duration_s > 0) {
    AVRational q = av_d2q(static_cast<double>(n) / info.duration_s, 1 << 20);
    info.frame_rate = {q.num, q.den};
  }
  return info;
}

}  // namespace reel::media::internal
