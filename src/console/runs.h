// Training runs as the console reads them: folders holding the metrics.jsonl that `reel train`
// appends to (train/trainer.h), its config.yaml, eval.json and checkpoints/.
//
// RunReader keeps each run's parsed series and reads only what was appended since the last call
// (by byte offset; a file that shrank is read again from the start), so a page polling a live
// run, or a list of 100 runs of 10,000 points each, costs the new lines only. Lines are parsed
// with simdjson; an evaluation's line (which holds every video's verdict) is remembered by offset
// and read whole only when its report is asked for. A malformed line (a run killed mid-write) is
// skipped and counted.
//
// Thread-safety: RunReader's members may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::console {

// The per-step series, in file order, as parallel columns (NaN: absent in that line).
struct RunSeries {
  std::vector<double> step, wall_s, epoch, loss, lr, clips_per_s, input_wait_share, grad_norm;
  size_t size() const { return step.size(); }
};

struct EvalPoint {
  int64_t step = 0, epoch = 0;
  std::string event;  // "eval" or "final_eval"
  double top1 = 0, top5 = 0, video_top1 = 0, wall_s = 0;
  uint64_t offset = 0, length = 0;  // where its line is in metrics.jsonl
};

struct CheckpointPoint {
  int64_t step = 0;
  double seconds = 0, wall_s = 0;
};

// What one run folder holds so far.
struct RunData {
  RunSeries series;
  std::vector<EvalPoint> evals;
  std::vector<CheckpointPoint> checkpoints;
  double first_time = 0;    // Unix seconds of the first timed line; 0 when none has a time
  int64_t malformed = 0;    // lines skipped
  int64_t modified_ms = 0;  // metrics.jsonl's mtime
};

// Folders under `root` (itself included, at most `depth` levels down) holding a metrics.jsonl,
// sorted. Errors: NotFound when `root` is not a folder.
Result<std::vector<std::string>> FindRunFolders(const std::string& root, int depth = 6);

// Thins `n` points to at most `max_points` (0: all): buckets of equal width, keeping in each the
// first point, the lowest and the highest `key` value, and always the last point, so spikes
// survive. Returns the kept indices, ascending.
std::vector<size_t> ThinIndices(const std::vector<double>& key, size_t max_points);

class RunReader {
 public:
  // A snapshot of `folder`'s run after reading what was appended. Errors: NotFound when the
  // folder has no metrics.jsonl; Unavailable when it cannot be read.
  Result<std::shared_ptr<const RunData>> Read(const std::string& folder);

  // The evaluation report of `point` as written (metrics.jsonl's line). Errors: DataLoss when the
  // line no longer parses.
  static Result<nlohmann::json> ReadEvalLine(const std::string& folder, const EvalPoint& point);

 private:
  struct Entry {
    std::mutex mu;  // one reader per run at a time
    uint64_t offset = 0;
    std::shared_ptr<const RunData> data = std::make_shared<RunData>();
  };
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace reel::console
