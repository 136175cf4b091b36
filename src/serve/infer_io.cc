#include "serve/infer_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <thread>

#include "base/strings.h"
#include "serve/video.h"
#include "storage/open.h"

namespace reel::serve {
namespace {

// The batch size of `input`, whose shape must be sample_shape with or without a leading B.
Result<int64_t> BatchOf(const Tensor& input, const ModelInfo& info) {
  const std::vector<int64_t>& want = info.sample_shape;
  const std::vector<int64_t>& got = input.shape;
  if (got == want) return 1;
  if (got.size() == want.size() + 1 && std::equal(want.begin(), want.end(), got.begin() + 1) &&
      got[0] >= 1) {
    return got[0];
  }
  return InvalidArgumentError("input '" + input.name + "' has shape " + ShapeText(got) +
                              "; model '" + info.name + "' takes [B," + ShapeText(want).substr(1));
}

// Raw pixels to the model's input: (x / 255 - mean) / std per channel, with the mean and std
// of the model's own evaluation transform.
std::vector<float> NormalizeUint8(const std::string& bytes, const ModelInfo& info) {
  const loader::TransformOptions& transform = info.video.transform;
  const int64_t channels = info.sample_shape[0];
  const int64_t plane = info.sample_size() / channels;
  std::vector<float> out(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / plane) % channels) % 3;
    const float x = static_cast<float>(static_cast<uint8_t>(bytes[i])) / 255.f;
    out[i] = (x - transform.mean[c]) / transform.std[c];
  }
  return out;
}

bool IsVideoInput(const Tensor& input) {
  return input.name == kUri || input.datatype == DataType::kBytes;
}

Status CheckInput(const InferRequest& request, const ModelInfo& info) {
  const bool one = request.inputs.size() == 1;
  const std::string name = one ? request.inputs[0].name : "";
  if (!one || (name != kInput && name != kUri)) {
    return InvalidArgumentError(
        "model '" + info.name + "' takes one input, 'input' or 'uri'; the request has " +
        std::to_string(request.inputs.size()) +
        (request.inputs.empty() ? "" : " ('" + request.inputs[0].name + "')"));
  }
  const DataType type = request.inputs[0].datatype;
  if (name == kUri && type != DataType::kBytes) {
    return InvalidArgumentError("input 'uri' must be BYTES (one URI or path per video)");
  }
  if (type != DataType::kFp32 && type != DataType::kUint8 && type != DataType::kBytes) {
    return InvalidArgumentError(
        "input 'input' must be FP32 or UINT8 pixels or BYTES (encoded "
        "videos), not " +
        std::string(DataTypeName(type)));
  }
  return Status::Ok();
}

Status CheckOutputs(const InferRequest& request, const ModelInfo& info) {
  for (const RequestedOutput& o : request.outputs) {
    if (o.name != kLogits && o.name != kProbabilities && o.name != kTimeline) {
      return InvalidArgumentError("model '" + info.name + "' has no output '" + o.name +
                                  "' (it has 'logits', 'probabilities' and, for videos, "
                                  "'timeline')");
    }
    if (o.name == kTimeline && o.classification) {
      return InvalidArgumentError("output 'timeline' takes no classification parameter");
    }
  }
  if (WantsTimeline(request) && !IsVideoInput(request.inputs[0])) {
    return InvalidArgumentError("a timeline needs a video input (BYTES 'input' or 'uri')");
  }
  return Status::Ok();
}

// A local path made absolute and without "..", so that a prefix check means what it says.
std::string Normalized(std::string_view uri) {
  if (uri.find("://") != std::string_view::npos) return std::string(uri);
  return std::filesystem::absolute(std::filesystem::path(uri)).lexically_normal().string();
}

// The classification extension: each row's top k as "score:index:label", best first.
Tensor Classification(const std::string& name, const std::vector<float>& scores, int64_t batch,
                      int k, const ModelInfo& info) {
  const int64_t classes = info.num_classes();
  const int64_t top = std::min<int64_t>(k, classes);
  std::vector<std::string> labels;
  for (int64_t row = 0; row < batch; ++row) {
    const float* s = scores.data() + row * classes;
    const std::vector<int64_t> order = TopK(s, classes, k);
    for (int64_t i = 0; i < top; ++i) {
      char score[32];
      std::snprintf(score, sizeof(score), "%.6g", s[order[i]]);
      labels.push_back(std::string(score) + ":" + std::to_string(order[i]) + ":" +
                       info.class_names[static_cast<size_t>(order[i])]);
    }
  }
  Tensor t = MakeBytesTensor(name, labels);
  t.shape = {batch, top};
  return t;
}

// A video's clips as a JSON array: each clip's time span, its best class and that probability.
std::string TimelineJson(const std::vector<float>& clip_logits, const VideoSamples& samples,
                         const ModelInfo& info) {
  const int64_t classes = info.num_classes();
  const std::vector<float> p = Softmax(clip_logits, classes);
  nlohmann::json timeline = nlohmann::json::array();
  for (int64_t c = 0; c < samples.clips; ++c) {
    const int64_t top = TopK(p.data() + c * classes, classes, 1)[0];
    timeline.push_back({{"start_s", samples.spans[static_cast<size_t>(c)].start_s},
                        {"end_s", samples.spans[static_cast<size_t>(c)].end_s},
                        {"index", top},
                        {"label", info.class_names[static_cast<size_t>(top)]},
                        {"score", p[static_cast<size_t>(c * classes + top)]}});
  }
  return timeline.dump();
}

// While alive, this request is one of the videos being decoded; threads() is its fair share of
// the cores: a lone video decodes on all of them, many at once on one each.
class DecodeShare {
 public:
  DecodeShare() : active_(++decoding_) {}
  ~DecodeShare() { --decoding_; }
  DecodeShare(const DecodeShare&) = delete;
  DecodeShare& operator=(const DecodeShare&) = delete;
  int threads() const {
    static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return std::max(1, cores / active_);
  }
  bool alone() const { return active_ == 1; }

 private:
  static inline std::atomic<int> decoding_{0};
  const int active_;
};

// Hands one video's clips to the batcher, and gives back their logits in order.
class ClipSubmitter {
 public:
  ClipSubmitter(Batcher& batcher, int64_t sample_size, const VideoScoring& how)
      : batcher_(batcher), sample_size_(sample_size), how_(how) {}

  // One clip, as soon as it is cut; a refusal (a full queue, shutdown) stops the cut, since
  // decoding on would be for nothing.
  Status Stream(std::vector<float> sample) { return Submit(std::move(sample), 1); }

  // A video's clips together (clips x sample_size floats), max_batch at a time.
  Status SubmitAll(std::vector<float> input) {
    const int64_t max_batch = batcher_.options().max_batch;
    const int64_t clips = static_cast<int64_t>(input.size()) / sample_size_;
    if (clips <= max_batch) return Submit(std::move(input), clips);
    for (int64_t first = 0; first < clips; first += max_batch) {
      const int64_t n = std::min(max_batch, clips - first);
      REEL_RETURN_IF_ERROR(Submit(
          {input.begin() + first * sample_size_, input.begin() + (first + n) * sample_size_}, n));
    }
    return Status::Ok();
  }

  // Every clip's logits, in order, once computed.
  Result<std::vector<float>> Logits() {
    std::vector<float> logits;
    for (const auto& answer : answers_) {
      const Result<BatchResult>& result = answer.get();
      if (!result.ok()) return result.status();
      logits.insert(logits.end(), result->output.begin(), result->output.end());
    }
    return logits;
  }

  const Status& refused() const { return refused_; }

 private:
  Status Submit(std::vector<float> input, int64_t n) {
    BatchWork work;
    work.input = std::move(input);
    work.n = n;
    work.deadline = how_.deadline;
    work.cancelled = how_.gone;
    answers_.push_back(batcher_.Submit(std::move(work)).share());
    const auto& answer = answers_.back();
    if (answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      refused_ = answer.get().status();  // a refusal is ready at once
    }
    return refused_;
  }

  Batcher& batcher_;
  const int64_t sample_size_;
  const VideoScoring& how_;
  std::vector<std::shared_future<Result<BatchResult>>> answers_;
  Status refused_;
};

bool Idle(const Batcher& batcher) {
  const BatcherStats stats = batcher.stats();
  return stats.queued == 0 && stats.in_flight == 0;
}

// One video's clips, decoded on this video's share of the cores, and their logits in order. A
// video decoded alone while the model is idle streams its clips: each goes to the batcher as soon
// as it is cut, and its forward pass runs beside the decoding of the rest (which takes one core).
// Otherwise the cores are busy anyway, and the clips go together once cut: a batch of them
// computes faster per clip than each alone (serve_bench, streamed against together: 1.08-1.21x
// the videos/s one request at a time, 0.90-1.04x four at a time).
Result<std::vector<float>> VideoClipLogits(Batcher& batcher, const ModelInfo& info,
                                           std::string_view video, const std::string& name,
                                           VideoSettings settings, const VideoScoring& how,
                                           VideoSamples* samples) {
  ClipSubmitter clips(batcher, info.sample_size(), how);
  bool stream = false;
  {
    const DecodeShare share;
    stream = how.stream_clips.value_or(share.alone() && Idle(batcher));
    settings.decode_threads = share.threads();
    SampleSink sink;
    if (stream) sink = [&](std::vector<float> sample) { return clips.Stream(std::move(sample)); };
    Result<VideoSamples> cut = VideoToSamples(video, name, settings, sink);
    REEL_RETURN_IF_ERROR(clips.refused());
    if (!cut.ok()) {
      return InvalidArgumentError(
          name + " is not a video the server can decode: " + cut.status().message());
    }
    *samples = std::move(*cut);
  }
  if (!stream) REEL_RETURN_IF_ERROR(clips.SubmitAll(std::move(samples->input)));
  return clips.Logits();
}

}  // namespace

std::vector<float> Softmax(const std::vector<float>& logits, int64_t classes) {
  std::vector<float> out(logits.size());
  for (size_t row = 0; row < logits.size() / static_cast<size_t>(classes); ++row) {
    const float* in = logits.data() + row * classes;
    float* p = out.data() + row * classes;
    const float top = *std::max_element(in, in + classes);
    double sum = 0;
    for (int64_t k = 0; k < classes; ++k) sum += p[k] = std::exp(in[k] - top);
    for (int64_t k = 0; k < classes; ++k) p[k] = static_cast<float>(p[k] / sum);
  }
  return out;
}

std::vector<int64_t> TopK(const float* scores, int64_t classes, int k) {
  std::vector<int64_t> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  const int64_t top = std::min<int64_t>(k, classes);
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.resize(static_cast<size_t>(top));
  return order;
}

bool WantsTimeline(const InferRequest& request) {
  return request.timeline ||
         std::any_of(request.outputs.begin(), request.outputs.end(),
                     [](const RequestedOutput& o) { return o.name == kTimeline; });
}

Status CheckRequest(const InferRequest& request, const ModelInfo& info) {
  REEL_RETURN_IF_ERROR(CheckInput(request, info));
  return CheckOutputs(request, info);
}

// A pixel tensor as one piece of batcher work.
Result<BatchWork> TensorWork(Tensor input, const ModelInfo& info) {
  BatchWork work;
  REEL_ASSIGN_OR_RETURN(work.n, BatchOf(input, info));
  if (input.datatype == DataType::kUint8) {
    work.input = NormalizeUint8(input.data, info);
  } else {
    work.input_bytes = std::move(input.data);
  }
  return work;
}

// The bytes of a video named by URI or path, when it lies under an allowed prefix.
Result<std::string> ReadAllowed(std::string_view uri, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) {
    return PermissionDeniedError("this server reads no URIs (start it with --allow-uri-prefix)");
  }
  const std::string normal = Normalized(uri);
  const bool allowed = normal.find("/../") == std::string::npos && !EndsWith(normal, "/..") &&
                       std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
                         return normal.rfind(Normalized(p), 0) == 0;
                       });
  if (!allowed) {
    return PermissionDeniedError("'" + PrintableForMessage(uri, 200) +
                                 "' is outside the prefixes this server may read");
  }
  REEL_ASSIGN_OR_RETURN(storage::ObjectLocation object, storage::OpenObjectUri(normal));
  return object.store->Get(object.key);
}

Result<Scores> ScoreVideos(Batcher& batcher, const ModelInfo& info,
                           const std::vector<std::string_view>& videos, const VideoScoring& how) {
  if (videos.empty()) return InvalidArgumentError("input 'input' holds no video");
  const int64_t classes = info.num_classes();
  VideoSettings settings = info.video;
  if (how.clips > 0) settings.clips = how.clips;
  Scores scores;
  scores.batch = static_cast<int64_t>(videos.size());
  scores.logits.assign(videos.size() * static_cast<size_t>(classes), 0.f);
  for (size_t v = 0; v < videos.size(); ++v) {
    if (how.gone && how.gone()) {
      return CancelledError("the client went away before the video was decoded");
    }
    const std::string name = "input element " + std::to_string(v);
    VideoSamples samples;
    REEL_ASSIGN_OR_RETURN(std::vector<float> clips,
                          VideoClipLogits(batcher, info, videos[v], name, settings, how, &samples));
    for (size_t i = 0; i < clips.size(); ++i) {
      scores.logits[v * classes + i % classes] += clips[i] / samples.clips;
    }
    if (how.timeline) scores.timelines.push_back(TimelineJson(clips, samples, info));
  }
  return scores;
}

InferResponse ResponseFor(const InferRequest& request, const std::string& model_name,
                          const ModelInfo& info, const Scores& scores) {
  InferResponse response;
  response.model_name = model_name;
  response.model_version = info.version;
  response.id = request.id;
  std::vector<RequestedOutput> wanted = request.outputs;
  if (wanted.empty())
    wanted = {{kLogits, false, std::nullopt}, {kProbabilities, false, std::nullopt}};
  const bool listed = std::any_of(wanted.begin(), wanted.end(),
                                  [](const RequestedOutput& o) { return o.name == kTimeline; });
  if (request.timeline && !listed) wanted.push_back({kTimeline, false, std::nullopt});
  const std::vector<int64_t> shape = {scores.batch, info.num_classes()};
  for (const RequestedOutput& o : wanted) {
    if (o.name == kTimeline) {
      response.outputs.push_back(MakeBytesTensor(kTimeline, scores.timelines));
      continue;
    }
    const std::vector<float> values =
        o.name == kLogits ? scores.logits : Softmax(scores.logits, info.num_classes());
    if (o.classification) {
      response.outputs.push_back(
          Classification(o.name, values, scores.batch, *o.classification, info));
    } else {
      response.outputs.push_back(MakeTensor(o.name, DataType::kFp32, shape, values));
    }
  }
  return response;
}

}  // namespace reel::serve
