#include "serve/video.h"

#include "base/random.h"
#include "ingest/clip_maker.h"
#include "media/decoder.h"
#include "media/input.h"

namespace reel::serve {
namespace {

// A lone request's video decodes on frame threads only from about 1 Mpixel a frame. Measured with
// `serve_bench --decode-only` on the 2-core VM (4 clips of H.264): two threads instead of one
// took 340x256, 320x180 and 1280x720 videos 4-10% longer (contexts cleared at open, and each
// frame waiting on the one before), and a 1920x1080 one 1.46x shorter.
constexpr int64_t kFrameThreadsMinPixels = int64_t{1} << 20;

// One cut clip as evaluation sees it: centre frames, resize and centre crop, normalised.
Status AppendSample(const std::vector<media::Frame>& frames, const VideoSettings& settings,
                    std::vector<float>* out) {
  loader::FrameStack stack;
  stack.t = static_cast<int>(frames.size());
  stack.h = frames.front().height;
  stack.w = frames.front().width;
  stack.c = 3;  // CutClips decodes RGB24
  stack.pixels.reserve(frames.size() * frames.front().data.size());
  for (const media::Frame& frame : frames) {
    stack.pixels.append(reinterpret_cast<const char*>(frame.data.data()), frame.data.size());
  }
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
                                    const VideoSettings& settings, const SampleSink& sink) {
  ingest::ClipSettings cut = settings.ingest;
  cut.max_clips_per_video = settings.clips;
  VideoSamples samples;
  // The frames go straight from the decoder to the transform: no payload is encoded.
  const auto sample = [&](const ingest::CutVideo&, const ingest::PlannedClip& planned,
                          const std::vector<media::Frame>& frames) -> Status {
    if (frames.empty()) return Status::Ok();
    if (sink) {
      std::vector<float> sample;
      REEL_RETURN_IF_ERROR(AppendSample(frames, settings, &sample));
      REEL_RETURN_IF_ERROR(sink(std::move(sample)));
    } else {
      REEL_RETURN_IF_ERROR(AppendSample(frames, settings, &samples.input));
      // Room for every clip at once, rather than copies as the vector doubles.
      if (samples.clips == 0) samples.input.reserve(samples.input.size() * settings.clips);
    }
    ++samples.clips;
    samples.spans.push_back({planned.start_s, planned.end_s});
    return Status::Ok();
  };
  media::DecodeOptions decode;
  decode.threads = settings.decode_threads;
  decode.frame_threads_min_pixels = kFrameThreadsMinPixels;
  REEL_RETURN_IF_ERROR(
      ingest::CutClips(media::Input::View(bytes, std::string(name)), -1, -1, cut, sample, decode));
  if (samples.clips == 0) {
    return FailedPreconditionError(std::string(name) + ": no clip could be cut from the video");
  }
  return samples;
}

}  // namespace reel::serve
