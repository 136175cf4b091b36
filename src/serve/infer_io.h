// The inference service's requests and answers apart from HTTP and routing (service.cc): input
// and output checks, pixels and videos to batcher work, scores to response tensors. Private to
// src/serve.
// Thread-safety: pure functions, except that ScoreVideos blocks on the batcher.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "serve/batcher.h"
#include "serve/kserve.h"
#include "serve/model.h"

namespace reel::serve {

inline constexpr const char* kInput = "input";
inline constexpr const char* kUri = "uri";
inline constexpr const char* kLogits = "logits";
inline constexpr const char* kProbabilities = "probabilities";
inline constexpr const char* kTimeline = "timeline";

// One input, 'input' (FP32, UINT8 or BYTES) or 'uri' (BYTES); outputs the model has; a timeline
// only for videos. InvalidArgument naming the problem.
Status CheckRequest(const InferRequest& request, const ModelInfo& info);

// A pixel tensor (FP32, or UINT8 normalised here) as one piece of batcher work. An FP32
// tensor's bytes move into it, not copied.
Result<BatchWork> TensorWork(Tensor input, const ModelInfo& info);

// The bytes of a video named by URI or path, when it lies under one of `prefixes`
// (PermissionDenied otherwise, and always when there are none).
Result<std::string> ReadAllowed(std::string_view uri, const std::vector<std::string>& prefixes);

struct Scores {
  int64_t batch = 0;
  std::vector<float> logits;           // batch × classes
  std::vector<std::string> timelines;  // per video, when asked: a JSON array, one entry per clip
};

struct VideoScoring {
  std::optional<Clock::TimePoint> deadline;
  std::function<bool()> gone;  // the client left (may be empty)
  int clips = 0;               // clips per video; 0: the model's own setting
  bool timeline = false;
  // Whether a video's clips go to the batcher one by one as they are cut (their forward passes
  // overlapping the decoding of the rest) or together once cut. Unset: one by one when no other
  // video is being decoded and the batcher has no work.
  std::optional<bool> stream_clips;
};

// Each video decoded on the caller's thread into clips, which run through `batcher` (see
// VideoScoring::stream_clips); a video's logits are the mean of its clips'. Errors: InvalidArgument
// for a video that cannot be decoded, Cancelled when the client left, and the batcher's.
Result<Scores> ScoreVideos(Batcher& batcher, const ModelInfo& info,
                           const std::vector<std::string_view>& videos, const VideoScoring& how);

// Row-wise softmax of `logits`, rows of `classes`.
std::vector<float> Softmax(const std::vector<float>& logits, int64_t classes);

// The indices of the k highest of `scores[0..classes)`, best first (ties: the lower index).
std::vector<int64_t> TopK(const float* scores, int64_t classes, int k);

// Whether the request asks for the per-clip timeline (parameter or output "timeline").
bool WantsTimeline(const InferRequest& request);

// The outputs the request asks for (logits and probabilities when it names none), with the
// classification extension's labels and the timeline where asked.
InferResponse ResponseFor(const InferRequest& request, const std::string& model_name,
                          const ModelInfo& info, const Scores& scores);

}  // namespace reel::serve
