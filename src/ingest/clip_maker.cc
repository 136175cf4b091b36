#include "ingest/clip_maker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/clock.h"
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

Result<std::string> EncodePayload(const ClipSettings& clip, const EncodeSettings& encode,
                                  const CutVideo& cut, const std::vector<media::Frame>& frames) {
  if (encode.mode != dataset::DatasetMode::kVideo) {
    dataset::FramesCodecOptions fo;
    fo.level = encode.zstd_level;
    return dataset::EncodeFrames(frames, fo);
  }
  media::EncoderOptions eo;
  eo.width = cut.width;
  eo.height = cut.height;
  eo.fps_num = cut.rate_num;
  eo.fps_den = cut.rate_den;
  eo.gop = clip.clip_frames;  // one keyframe, at the clip's first frame
  eo.crf = encode.crf;
  eo.preset = encode.preset;
  eo.threads = 1;
  if (!frames.empty()) {  // the cut's YUV frames go to x264 as they are, with their colour
    eo.input = frames.front().format;
    eo.color_matrix = frames.front().color_matrix;
    eo.full_range = frames.front().full_range;
  }
  REEL_ASSIGN_OR_RETURN(auto encoder, media::VideoEncoder::Create(eo));
  for (const media::Frame& frame : frames) REEL_RETURN_IF_ERROR(encoder->Add(frame));
  return encoder->Finish();
}

Result<dataset::Record> ClipRecord(const ClipJob& job, const ClipSettings& clip,
                                   const EncodeSettings& encode, const CutVideo& cut,
                                   const PlannedClip& planned,
                                   const std::vector<media::Frame>& frames) {
  // H.264 4:2:0 stores even sizes: the encoder pads an odd side by repeating its last pixels.
  const bool video_mode = encode.mode == dataset::DatasetMode::kVideo;
  dataset::Record record;
  record.key = ClipKey(job.key_base, planned.index);
  record.label = job.video->label;
  record.label_name = job.class_name;
  record.payload_ext = std::string(dataset::PayloadExtension(encode.mode));
  REEL_ASSIGN_OR_RETURN(record.payload, EncodePayload(clip, encode, cut, frames));
  record.metadata = {
      {"source", job.source_uri},
      {"start_frame", planned.frames.front()},
      {"end_frame", planned.frames.back() + 1},
      {"start_s", planned.start_s},
      {"end_s", planned.end_s},
      {"fps", static_cast<double>(cut.rate_num) / cut.rate_den},
      {"frames", static_cast<int>(frames.size())},
      {"width", video_mode ? (cut.width + 1) & ~1 : cut.width},
      {"height", video_mode ? (cut.height + 1) & ~1 : cut.height},
      {"padded", planned.padded},
      {"split", job.video->split},
  };
  return record;
}

// The frames at `indices` (in that order), those in `kept` taken from there, the rest decoded:
// a clip that starts before the previous one ended then decodes on from where that one
// stopped instead of seeking back to a keyframe and decoding the shared frames again.
// Afterwards `kept` holds the frames `next` (the next clip's indices) will need again.
Result<std::vector<media::Frame>> DecodeReusing(media::VideoDecoder& decoder,
                                                const std::vector<int64_t>& indices,
                                                const std::vector<int64_t>& next,
                                                std::map<int64_t, media::Frame>* kept) {
  std::vector<int64_t> missing;  // once each: a padded clip repeats its last frame
  for (int64_t i : indices) {
    if (kept->count(i) == 0 && std::find(missing.begin(), missing.end(), i) == missing.end()) {
      missing.push_back(i);
    }
  }
  REEL_ASSIGN_OR_RETURN(std::vector<media::Frame> decoded, decoder.DecodeFrames(missing));
  for (media::Frame& frame : decoded) {
    const int64_t index = frame.index;
    kept->emplace(index, std::move(frame));
  }
  // Copies only where a frame has two owners: this clip and the next, or a repeat in this one.
  std::map<int64_t, media::Frame> again;
  for (int64_t i : next) {
    auto it = kept->find(i);
    if (it != kept->end()) again.emplace(i, it->second);
  }
  std::vector<media::Frame> frames;
  frames.reserve(indices.size());
  for (auto i = indices.begin(); i != indices.end(); ++i) {
    media::Frame& frame = kept->at(*i);
    const bool repeated = std::find(i + 1, indices.end(), *i) != indices.end();
    frames.push_back(repeated ? frame : std::move(frame));
  }
  *kept = std::move(again);
  return frames;
}

}  // namespace

Status CutClips(const media::Input& input, double start_s, double end_s, const ClipSettings& clip,
                const ClipSink& sink, const media::DecodeOptions& decode, StageTimes* spent) {
  media::DecodeOptions options = decode;
  options.short_side = clip.short_side;
  StageTimes unused;
  if (spent == nullptr) spent = &unused;
  auto started = std::chrono::steady_clock::now();
  REEL_ASSIGN_OR_RETURN(auto decoder, media::VideoDecoder::Open(input, options));
  spent->open_s += SecondsSince(started);
  const media::VideoInfo& info = decoder->info();
  if (info.frame_count <= 0) {
    return FailedPreconditionError(input.name() + ": the video has no decodable frames");
  }
  std::vector<double> times;
  times.reserve(static_cast<size_t>(info.frame_count));
  for (int64_t i = 0; i < info.frame_count; ++i) times.push_back(info.FrameTime(i));
  const std::vector<PlannedClip> plan = PlanClips(times, start_s, end_s, clip);
  if (plan.empty()) {
    return FailedPreconditionError(input.name() + ": no frames in the requested segment [" +
                                   std::to_string(start_s) + ", " + std::to_string(end_s) + ") s");
  }
  CutVideo cut;
  cut.width = decoder->output_width();
  cut.height = decoder->output_height();
  std::tie(cut.rate_num, cut.rate_den) = OutputRate(clip, info);
  double decoding = 0;
  std::map<int64_t, media::Frame> kept;  // overlapping clips' shared frames
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedClip& planned = plan[i];
    const std::vector<int64_t> none;
    const std::vector<int64_t>& next = i + 1 < plan.size() ? plan[i + 1].frames : none;
    // Clips are planned in file order, so the decoder reads forward through the video once.
    started = std::chrono::steady_clock::now();
    REEL_ASSIGN_OR_RETURN(std::vector<media::Frame> frames,
                          DecodeReusing(*decoder, planned.frames, next, &kept));
    decoding += SecondsSince(started);
    REEL_RETURN_IF_ERROR(sink(cut, planned, frames));
  }
  const double converting = decoder->stats().convert_s;
  spent->convert_s += converting;
  spent->decode_s += decoding - converting;
  return Status::Ok();
}

Result<std::vector<dataset::Record>> MakeClips(const ClipJob& job, const media::Input& input,
                                               const ClipSettings& clip,
                                               const EncodeSettings& encode, StageTimes* times) {
  StageTimes spent;
  std::vector<dataset::Record> records;
  const auto store = [&](const CutVideo& cut, const PlannedClip& planned,
                         const std::vector<media::Frame>& frames) -> Status {
    const auto started = std::chrono::steady_clock::now();
    REEL_ASSIGN_OR_RETURN(dataset::Record record,
                          ClipRecord(job, clip, encode, cut, planned, frames));
    spent.encode_s += SecondsSince(started);
    records.push_back(std::move(record));
    return Status::Ok();
  };
  // Video mode's x264 takes YUV: the resize stays in YUV, and no pixel goes through RGB and back.
  media::DecodeOptions decode;
  decode.format = encode.mode == dataset::DatasetMode::kVideo ? media::PixelFormat::kYuv420p
                                                              : media::PixelFormat::kRgb24;
  Status cut = CutClips(input, job.video->start_s, job.video->end_s, clip, store, decode, &spent);
  if (times != nullptr) *times += spent;  // a failed video's time was spent too
  REEL_RETURN_IF_ERROR(cut);
  return records;
}

}  // namespace reel::ingest
