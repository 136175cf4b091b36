#include "console/runs.h"

#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/files.h"
#include "base/json.h"

namespace reel::console {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr char kMetricsFile[] = "/metrics.jsonl";

double Number(simdjson::dom::element line, const char* key) {
  double value = kNaN;
  simdjson::dom::element field;
  if (line[key].get(field) != simdjson::SUCCESS) return kNaN;
  if (field.get_double().get(value) == simdjson::SUCCESS) return value;
  int64_t i = 0;
  if (field.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return kNaN;
}

int64_t Integer(simdjson::dom::element line, const char* key) {
  const double value = Number(line, key);
  return std::isnan(value) ? 0 : static_cast<int64_t>(value);
}

// Seconds since the run's first timed line (NaN for lines written before lines had a time).
double WallSeconds(simdjson::dom::element line, RunData* data) {
  const double time = Number(line, "time");
  if (std::isnan(time)) return kNaN;
  if (data->first_time == 0) data->first_time = time;
  return time - data->first_time;
}

void AddStep(simdjson::dom::element line, RunData* data) {
  RunSeries& s = data->series;
  s.step.push_back(Number(line, "step"));
  s.wall_s.push_back(WallSeconds(line, data));
  s.epoch.push_back(Number(line, "epoch"));
  s.loss.push_back(Number(line, "loss"));
  s.lr.push_back(Number(line, "lr"));
  s.clips_per_s.push_back(Number(line, "clips_per_s"));
  s.input_wait_share.push_back(Number(line, "input_wait_share"));
  s.grad_norm.push_back(Number(line, "grad_norm"));
}

void AddEvent(simdjson::dom::element line, std::string_view event, uint64_t offset, uint64_t length,
              RunData* data) {
  if (event == "eval" || event == "final_eval") {
    EvalPoint p;
    p.event = std::string(event);
    p.epoch = Integer(line, "epoch");
    p.top1 = Number(line, "top1");
    p.top5 = Number(line, "top5");
    p.video_top1 = Number(line, "video_top1");
    p.wall_s = WallSeconds(line, data);
    p.offset = offset;
    p.length = length;
    // An evaluation line has no step of its own: it follows the step it evaluated.
    p.step = data->series.size() > 0 ? static_cast<int64_t>(data->series.step.back()) : 0;
    if (line["step"].error() == simdjson::SUCCESS) p.step = Integer(line, "step");
    data->evals.push_back(std::move(p));
  } else if (event == "checkpoint") {
    data->checkpoints.push_back(
        {Integer(line, "step"), Number(line, "seconds"), WallSeconds(line, data)});
  }
}

// Parses the complete lines of `text` (which starts at `base` in the file); returns how many
// bytes it consumed (up to the last newline).
uint64_t ParseLines(std::string_view text, uint64_t base, RunData* data) {
  simdjson::dom::parser parser;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) break;  // a line still being written
    const std::string_view line_text = text.substr(pos, end - pos);
    simdjson::dom::element line;
    if (!line_text.empty() &&
        parser.parse(line_text.data(), line_text.size()).get(line) == simdjson::SUCCESS &&
        line.is_object()) {
      std::string_view event;
      if (line["event"].get(event) == simdjson::SUCCESS) {
        AddEvent(line, event, base + pos, line_text.size(), data);
      } else if (line["step"].error() == simdjson::SUCCESS) {
        AddStep(line, data);
      }
    } else if (!line_text.empty()) {
      ++data->malformed;
    }
    pos = end + 1;
  }
  return pos;
}

Result<std::string> ReadFrom(const std::string& path, uint64_t offset, uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return UnavailableError("cannot open " + path);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(size - offset, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace

Result<std::vector<std::string>> FindRunFolders(const std::string& root, int depth) {
  // A run's own folders (checkpoints/step-N) hold no runs.
  return FindFoldersHolding(root, "metrics.jsonl", depth, {"checkpoints"});
}

std::vector<size_t> ThinIndices(const std::vector<double>& key, size_t max_points) {
  const size_t n = key.size();
  std::vector<size_t> out;
  if (max_points == 0 || n <= max_points || max_points < 4) {
    out.resize(max_points == 0 || n <= max_points ? n : std::min(n, max_points));
    for (size_t i = 0; i < out.size(); ++i) out[i] = i;
    if (!out.empty() && out.back() != n - 1) out.back() = n - 1;
    return out;
  }
  const size_t buckets = max_points / 3;  // up to three points per bucket
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * n / buckets, end = (b + 1) * n / buckets;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (!(key[i] >= key[lo])) lo = i;  // NaN never wins
      if (key[i] > key[hi]) hi = i;
    }
    for (size_t i : {begin, lo, hi}) out.push_back(i);
  }
  out.push_back(n - 1);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::shared_ptr<const RunData>> RunReader::Read(const std::string& folder) {
  const std::string path = folder + kMetricsFile;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return NotFoundError("no run at " + folder);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<Entry>& slot = entries_[folder];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard lock(entry->mu);
  const auto size = static_cast<uint64_t>(st.st_size);
  const int64_t mtime_ms =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  if (size < entry->offset) {  // rewritten: start over
    entry->offset = 0;
    entry->data = std::make_shared<RunData>();
  }
  if (size == entry->offset && entry->data->modified_ms == mtime_ms) return entry->data;
  REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFrom(path, entry->offset, size));
  // Copy-on-write: a page still holding the last snapshot keeps it unchanged.
  auto next = std::make_shared<RunData>(*entry->data);
  entry->offset += ParseLines(bytes, entry->offset, next.get());
  next->modified_ms = mtime_ms;
  entry->data = std::move(next);
  return entry->data;
}

Result<nlohmann::json> RunReader::ReadEvalLine(const std::string& folder, const EvalPoint& point) {
  const std::string path = folder + kMetricsFile;
  REEL_ASSIGN_OR_RETURN(std::string line,
                        ReadFrom(path, point.offset, point.offset + point.length));
  Result<nlohmann::json> doc = ParseJson(line, path + " at byte " + std::to_string(point.offset));
  if (!doc.ok()) return DataLossError(doc.status().message());
  return doc;
}

}  // namespace reel::console
