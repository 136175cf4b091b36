#include "ingest/clip_maker.h"

#include <cmath>
#include <cstdio>

#include "dataset/frames_codec.h"
#include "media/decoder.h"
#include "media/encoder.h"

namespace reel::ingest {
namespace {

std::string ClipKey(const std::string& base, int index) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "_c%03d", index);
  return base + suffix;
}

// A frame rate as a fraction for the muxer: the resampling rate, else the source's average.
std::pair<int, int> OutputRate(const ClipSettings& clip, const media::VideoInfo& info) {
  if (clip.fps > 0) {
    double rounded = static_cast<double>(static_cast<int>(clip.fps));
    if (rounded == clip.fps) return {static_cast<int>(clip.fps), 1};
    return {static_cast<int>(std::lround(clip.fps * 1000)), 1000};
  }
  if (info.frame_rate.num > 0 && info.frame_rate.den > 0) {
    return {info.frame_rate.num, info.frame_rate.den};
  }
  return {25, 1};
}

}  // namespace

Result<std::vector<dataset::Record>> MakeClips(const ClipJob& job, const media::Input& input,
                                               const ClipSettings& clip,
                                               const EncodeSettings& encode) {
  media::DecodeOptions options;
  options.format = media::PixelFormat::kRgb24;
  options.short_side = clip.short_side;
  options.threads = 1;  // the ingest runs one video per worker
  REEL_ASSIGN_OR_RETURN(auto decoder, media::VideoDecoder::Open(input, options));
  const media::VideoInfo& info = decoder->info();
  if (info.frame_count <= 0) {
    return FailedPreconditionError(input.name() + ": the video has no decodable frames");
  }
  std::vector<double> times;
  times.reserve(static_cast<size_t>(info.frame_count));
  for (int64_t i = 0; i < info.frame_count; ++i) times.push_back(info.FrameTime(i));
  std::vector<PlannedClip> plan = PlanClips(times, job.video->start_s, job.video->end_s, clip);
  if (plan.empty()) {
    return FailedPreconditionError(input.name() + ": no frames in the requested segment [" +
                                   std::to_string(job.video->start_s) + ", " +
                                   std::to_string(job.video->end_s) + ") s");
  }
  const auto [rate_num, rate_den] = OutputRate(clip, info);
  const double clip_fps = static_cast<double>(rate_num) / rate_den;

  // H.264 4:2:0 stores even sizes: the encoder pads an odd side by repeating its last pixels.
  const bool video_mode = encode.mode == dataset::DatasetMode::kVideo;
  const int stored_width =
      video_mode ? (decoder->output_width() + 1) & ~1 : decoder->output_width();
  const int stored_height =
      video_mode ? (decoder->output_height() + 1) & ~1 : decoder->output_height();
  std::vector<dataset::Record> records;
  records.reserve(plan.size());
  for (const PlannedClip& planned : plan) {
    // Clips are planned in file order, so the decoder reads forward through the video once.
    REEL_ASSIGN_OR_RETURN(std::vector<media::Frame> frames, decoder->DecodeFrames(planned.frames));
    dataset::Record record;
    record.key = ClipKey(job.key_base, planned.index);
    record.label = job.video->label;
    record.label_name = job.class_name;
    record.payload_ext = std::string(dataset::PayloadExtension(encode.mode));
    if (encode.mode == dataset::DatasetMode::kVideo) {
      media::EncoderOptions eo;
      eo.width = decoder->output_width();
      eo.height = decoder->output_height();
      eo.fps_num = rate_num;
      eo.fps_den = rate_den;
      eo.gop = clip.clip_frames;  // one keyframe, at the clip's first frame
      eo.crf = encode.crf;
      eo.preset = encode.preset;
      eo.threads = 1;
      REEL_ASSIGN_OR_RETURN(auto encoder, media::VideoEncoder::Create(eo));
      for (const media::Frame& frame : frames) REEL_RETURN_IF_ERROR(encoder->Add(frame));
      REEL_ASSIGN_OR_RETURN(record.payload, encoder->Finish());
    } else {
      dataset::FramesCodecOptions fo;
      fo.level = encode.zstd_level;
      REEL_ASSIGN_OR_RETURN(record.payload, dataset::EncodeFrames(frames, fo));
    }
    record.metadata = {
        {"source", job.source_uri},
        {"start_frame", planned.frames.front()},
        {"end_frame", planned.frames.back() + 1},
        {"start_s", planned.start_s},
        {"end_s", planned.end_s},
        {"fps", clip_fps},
        {"frames", static_cast<int>(frames.size())},
        {"width", stored_width},
        {"height", stored_height},
        {"padded", planned.padded},
        {"split", job.video->split},
    };
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace reel::ingest
