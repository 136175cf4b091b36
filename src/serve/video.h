// Encoded video in, model input out: the decode path `reel serve` takes for a BYTES input. A
// video is cut as the ingest cut the training dataset (clip length, frame stride, fps, short side:
// the dataset manifest's clip settings), `clips` of its clips are taken evenly spread over its
// length, and each becomes one sample as evaluation sees it (centre frames, resize and centre
// crop, normalisation). The server averages the clips' scores into the video's.
//
// Errors: the decoder's for files that are not video (InvalidArgument, DataLoss for corrupt or
// truncated ones, Unimplemented for a codec FFmpeg lacks), FailedPrecondition for a video with
// no frames.
// Thread-safety: pure functions; each call decodes on its own.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ingest/clip_plan.h"
#include "loader/clip_transform.h"

namespace reel::serve {

struct VideoSettings {
  ingest::ClipSettings ingest;         // how the training dataset's clips were cut
  loader::ClipOptions clip;            // frames and stride within a cut clip
  loader::TransformOptions transform;  // evaluation: train = false
  int clips = 4;                       // clips per video, averaged
  int decode_threads = 1;              // FFmpeg frame threads for one video
};

// The ingest's clip settings as a dataset manifest's clip_settings record them (the "clip"
// object); fields it lacks keep their values in `settings`.
void ApplyManifestClipSettings(const nlohmann::json& clip_settings, ingest::ClipSettings* settings);

struct ClipSpan {
  double start_s = 0;  // the clip's first frame, and one frame past its last, in the video
  double end_s = 0;
};

struct VideoSamples {
  std::vector<float> input;  // clips × sample_size floats
  int64_t clips = 0;
  std::vector<ClipSpan> spans;  // one per clip
};

// Takes each clip's sample (sample_size floats) as soon as it is cut, while the rest of the video
// is still to decode, so that its forward pass can start; an error stops the cut and is returned.
using SampleSink = std::function<Status(std::vector<float> sample)>;

// `bytes`: a whole video file (any container and codec FFmpeg reads). `name` appears in errors.
// With a `sink`, the samples go there and VideoSamples::input stays empty.
Result<VideoSamples> VideoToSamples(std::string_view bytes, std::string_view name,
                                    const VideoSettings& settings,
                                    const SampleSink& sink = nullptr);

}  // namespace reel::serve
