// Classification metrics for evaluation: top-1, top-5, per-class accuracy, the confusion matrix,
// and video-level accuracy from several clips per video (scores averaged per video key).
// Thread-safety: one Evaluator per thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::train {

struct EvalReport {
  int64_t clips = 0;
  double top1 = 0, top5 = 0;  // clip level, in [0, 1]
  int64_t videos = 0;
  double video_top1 = 0;          // clip scores averaged per video
  std::vector<double> per_class;  // clip-level top-1 per class (NaN-free: 0 when absent)
  std::vector<int64_t> per_class_count;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted], clip level
  std::vector<std::string> class_names;         // by label index, when the caller knows them
  // Every video's verdict, by key: which ones are wrong, and how sure the model was.
  struct VideoPrediction {
    std::string video;
    int label = 0;
    int predicted = 0;
    double confidence = 0;  // the predicted class's mean clip score
  };
  std::vector<VideoPrediction> predictions;

  std::string ToJson() const;
};

class Evaluator {
 public:
  explicit Evaluator(int num_classes);
  // One clip: its class scores (logits or probabilities, num_classes of them), its label, and
  // the key of its video (clips with the same key are one video). InvalidArgument for a wrong
  // number of scores or a label out of range.
  Status Add(const std::vector<float>& scores, int label, const std::string& video_key);
  EvalReport Report() const;

 private:
  int num_classes_;
  int64_t clips_ = 0, top1_ = 0, top5_ = 0;
  std::vector<std::vector<int64_t>> confusion_;
  struct Video {
    std::vector<double> sum;
    int label = -1;
    int clips = 0;
  };
  std::map<std::string, Video> videos_;
};

}  // namespace reel::train
