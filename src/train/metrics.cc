#include "train/metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

namespace reel::train {

Evaluator::Evaluator(int num_classes)
    : num_classes_(num_classes),
      confusion_(static_cast<size_t>(num_classes),
                 std::vector<int64_t>(static_cast<size_t>(num_classes), 0)) {}

Status Evaluator::Add(const std::vector<float>& scores, int label, const std::string& video_key) {
  if (static_cast<int>(scores.size()) != num_classes_) {
    return InvalidArgumentError("evaluator: " + std::to_string(scores.size()) + " scores for " +
                                std::to_string(num_classes_) + " classes");
  }
  if (label < 0 || label >= num_classes_) {
    return InvalidArgumentError("evaluator: label " + std::to_string(label) + " is out of range");
  }
  // Rank of the true class: how many classes scored strictly higher (ties count in its favour).
  int higher = 0;
  for (float s : scores) higher += s > scores[static_cast<size_t>(label)];
  const auto predicted =
      static_cast<size_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
  ++clips_;
  top1_ += higher == 0;
  top5_ += higher < 5;
  ++confusion_[static_cast<size_t>(label)][predicted];
  Video& v = videos_[video_key];
  if (v.sum.empty()) v.sum.assign(static_cast<size_t>(num_classes_), 0.0);
  for (size_t i = 0; i < scores.size(); ++i) v.sum[i] += scores[i];
  v.label = label;
  ++v.clips;
  return Status::Ok();
}

EvalReport Evaluator::Report() const {
  EvalReport r;
  r.clips = clips_;
  r.top1 = clips_ ? static_cast<double>(top1_) / clips_ : 0;
  r.top5 = clips_ ? static_cast<double>(top5_) / clips_ : 0;
  r.confusion = confusion_;
  for (int c = 0; c < num_classes_; ++c) {
    const auto& row = confusion_[static_cast<size_t>(c)];
    int64_t total = std::accumulate(row.begin(), row.end(), int64_t{0});
    r.per_class_count.push_back(total);
    r.per_class.push_back(total ? static_cast<double>(row[static_cast<size_t>(c)]) / total : 0.0);
  }
  int64_t correct = 0;
  for (const auto& [key, v] : videos_) {
    auto best = static_cast<int>(std::max_element(v.sum.begin(), v.sum.end()) - v.sum.begin());
    correct += best == v.label;
    r.predictions.push_back({key, v.label, best, v.sum[static_cast<size_t>(best)] / v.clips});
  }
  r.videos = static_cast<int64_t>(videos_.size());
  r.video_top1 = r.videos ? static_cast<double>(correct) / r.videos : 0;
  return r;
}

std::string EvalReport::ToJson() const {
  nlohmann::json videos_json = nlohmann::json::array();
  for (const auto& p : predictions) {
    videos_json.push_back({{"video", p.video},
                           {"label", p.label},
                           {"predicted", p.predicted},
                           {"confidence", p.confidence}});
  }
  return nlohmann::json{{"clips", clips},
                        {"top1", top1},
                        {"top5", top5},
                        {"videos", videos},
                        {"video_top1", video_top1},
                        {"per_class", per_class},
                        {"per_class_count", per_class_count},
                        {"confusion", confusion},
                        {"class_names", class_names},
                        {"predictions", videos_json}}
      .dump();
}

}  // namespace reel::train
