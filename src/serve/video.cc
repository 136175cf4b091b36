#include "serve/video.h"

#include "base/random.h"
#include "dataset/frames_codec.h"
#include "ingest/clip_maker.h"
#include "media/input.h"

namespace reel::serve {
namespace {

// One cut clip as evaluation sees it: centre frames, resize and centre crop, normalised.
Status AppendSample(const dataset::Record& record, const VideoSettings& settings,
                    std::vector<float>* out) {
  REEL_ASSIGN_OR_RETURN(dataset::DecodedFrames frames, dataset::DecodeFrames(record.payload));
  loader::FrameStack stack;
  stack.t = static_cast<int>(frames.header.frames);
  stack.h = static_cast<int>(frames.header.height);
  stack.w = static_cast<int>(frames.header.width);
  stack.c = static_cast<int>(frames.header.channels);
  stack.pixels = std::move(frames.pixels);
  loader::ClipOptions clip = settings.clip;
  clip.sampling = loader::ClipSampling::kCenter;
  clip.clips_per_video = 1;
  loader::TransformOptions transform = settings.transform;
  transform.train = false;
  transform.normalize = true;
  Rng unused(0);  // evaluation draws nothing
  REEL_ASSIGN_OR_RETURN(std::vector<int> starts, loader::ClipStarts(stack.t, clip, unused));
  return loader::MakeClip(stack, starts[0], clip, transform, loader::Flips{}, unused, out, nullptr);
}

}  // namespace

void ApplyManifestClipSettings(const nlohmann::json& clip_settings,
                               ingest::ClipSettings* settings) {
  const auto clip = clip_settings.find("clip");
  if (clip == clip_settings.end() || !clip->is_object()) return;
  const auto read_int = [&](const char* key, int* value) {
    const auto it = clip->find(key);
    if (it != clip->end() && it->is_number_integer()) *value = it->get<int>();
  };
  read_int("clip_frames", &settings->clip_frames);
  read_int("frame_stride", &settings->frame_stride);
  read_int("clip_stride", &settings->clip_stride);
  read_int("short_side", &settings->short_side);
  const auto fps = clip->find("fps");
  if (fps != clip->end() && fps->is_number()) settings->fps = fps->get<double>();
}

Result<VideoSamples> VideoToSamples(std::string_view bytes, std::string_view name,
                                    const VideoSettings& settings) {
  ingest::SourceVideo source;
  source.key = std::string(name);
  source.label = 0;
  ingest::ClipJob job;
  job.video = &source;
  job.class_name = "video";
  job.key_base = "video";
  job.source_uri = std::string(name);
  ingest::ClipSettings cut = settings.ingest;
  cut.max_clips_per_video = settings.clips;
  // Frames mode at zstd level 1: the cheapest payload the loader's path reads back.
  ingest::EncodeSettings encode;
  encode.mode = dataset::DatasetMode::kFrames;
  encode.zstd_level = 1;
  REEL_ASSIGN_OR_RETURN(
      std::vector<dataset::Record> records,
      ingest::MakeClips(job, media::Input::View(bytes, std::string(name)), cut, encode));
  VideoSamples samples;
  for (const dataset::Record& record : records) {
    REEL_RETURN_IF_ERROR(AppendSample(record, settings, &samples.input));
    ++samples.clips;
  }
  if (samples.clips == 0) {
    return FailedPreconditionError(std::string(name) + ": no clip could be cut from the video");
  }
  return samples;
}

}  // namespace reel::serve
