// `reel predict`: the run (predict.h); predict_inputs.cc lists the inputs.
#include "serve/predict.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <thread>

#include "base/json.h"
#include "base/logging.h"
#include "base/ordered_map.h"
#include "base/sync_point.h"
#include "base/thread_pool.h"
#include "serve/batcher.h"
#include "serve/infer_io.h"
#include "storage/open.h"

namespace reel::serve {
namespace {

using nlohmann::json;
using LineJson = nlohmann::ordered_json;  // a line's fields in the order written: key first
using storage::ObjectStore;

constexpr const char* kProgressKey = "progress.json";
constexpr const char* kPredictionsFormat = "reel-predictions";

struct PredictedLine {
  std::string text;  // one JSON object, no newline
  bool error = false;
};

template <typename Json>
std::string DumpedLine(const Json& line) {
  return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

LineJson LineStart(const PredictInput& in) {
  LineJson line = {{"key", in.key}, {"source", in.source}};
  if (!in.true_label.empty()) line["true_label"] = in.true_label;
  if (!in.split.empty()) line["split"] = in.split;
  return line;
}

// Errors that say the input is bad (not the model, the store or the machine).
bool IsInputsFault(const Status& s) {
  static const std::set<StatusCode> kFaults = {
      StatusCode::kNotFound,  StatusCode::kPermissionDenied,   StatusCode::kInvalidArgument,
      StatusCode::kDataLoss,  StatusCode::kFailedPrecondition, StatusCode::kUnimplemented,
      StatusCode::kOutOfRange};
  return kFaults.count(s.code()) > 0;
}

// An error line when the input is at fault; the run's error (naming the input) otherwise.
Result<PredictedLine> FailedInput(const PredictInput& in, const Status& status) {
  if (!IsInputsFault(status)) return status.WithContext(in.key);
  std::string message = status.message();
  const std::string element = "input element 0";  // ScoreVideos's name for the one video
  for (size_t at; (at = message.find(element)) != std::string::npos;) {
    message.replace(at, element.size(), in.key);
  }
  LineJson line = LineStart(in);
  line["error"] = message;
  return PredictedLine{DumpedLine(line), true};
}

// The k best classes by the softmax of the video's mean logits, best first (ties: lower index).
LineJson TopClasses(const std::vector<float>& logits, int k, const ModelInfo& info) {
  const std::vector<float> p = Softmax(logits, static_cast<int64_t>(logits.size()));
  LineJson out = LineJson::array();
  for (int64_t i : TopK(p.data(), static_cast<int64_t>(p.size()), k)) {
    out.push_back({{"label", info.class_names[static_cast<size_t>(i)]},
                   {"index", i},
                   {"score", std::round(double{p[static_cast<size_t>(i)]} * 1e6) / 1e6}});
  }
  return out;
}

Result<std::string> ReadInputBytes(const PredictListing& listing, const PredictInput& in) {
  if (!in.object.empty()) return listing.store->Get(in.object);
  REEL_ASSIGN_OR_RETURN(storage::ObjectLocation at, storage::OpenObjectUri(in.source));
  return at.store->Get(at.key);
}

// Read, decode, batch and average as the server does (ScoreVideos), then one line.
Result<PredictedLine> PredictOne(const PredictListing& listing, const PredictInput& in,
                                 Batcher& batcher, const ModelInfo& info, const PredictOptions& o) {
  if (!in.error.empty()) return FailedInput(in, NotFoundError(in.error));
  Result<std::string> bytes = ReadInputBytes(listing, in);
  if (!bytes.ok()) return FailedInput(in, bytes.status());
  VideoScoring how;
  how.clips = o.clips;
  how.timeline = o.timeline;
  Result<Scores> scores = ScoreVideos(batcher, info, {std::string_view(*bytes)}, how);
  if (!scores.ok()) return FailedInput(in, scores.status());
  LineJson line = LineStart(in);
  line["top"] = TopClasses(scores->logits, o.top_k, info);
  if (o.timeline) line["timeline"] = LineJson::parse(scores->timelines.at(0), nullptr, false);
  return PredictedLine{DumpedLine(line), false};
}

struct FinishedPart {
  std::string name;
  int64_t lines = 0;
  int64_t errors = 0;
};

struct PredictRecord {  // progress.json
  json model;
  json settings;
  bool complete = false;
  std::vector<FinishedPart> parts;
};

std::string SerializeRecord(const PredictRecord& r) {
  json parts = json::array();
  for (const FinishedPart& p : r.parts) {
    parts.push_back({{"name", p.name}, {"lines", p.lines}, {"errors", p.errors}});
  }
  const json doc = {{"format", kPredictionsFormat}, {"version", 1},           {"model", r.model},
                    {"settings", r.settings},       {"complete", r.complete}, {"parts", parts}};
  return DumpedLine(doc) + "\n";
}

// progress.json as an earlier run left it, or `fresh` when there is none. FailedPrecondition
// when it records another model or other settings.
Result<PredictRecord> LoadRecord(ObjectStore& out, PredictRecord fresh) {
  Result<std::string> text = out.Get(kProgressKey);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) return fresh;
  REEL_RETURN_IF_ERROR(text);
  const std::string what = storage::ObjectUri(out, kProgressKey);
  REEL_ASSIGN_OR_RETURN(json doc, ParseJson(*text, what));
  JsonFields f(doc, "");
  if (f.String("format") != kPredictionsFormat || f.Int("version") != 1 || !f.ok()) {
    return FailedPreconditionError(what + " is not the progress of `reel predict` version 1");
  }
  if (doc["model"] != fresh.model || doc["settings"] != fresh.settings) {
    return FailedPreconditionError(what + " holds predictions of " + doc["model"].dump() +
                                   " with " + doc["settings"].dump() + "; this run has " +
                                   fresh.model.dump() + " with " + fresh.settings.dump() +
                                   ": write to another output");
  }
  for (const json& part : f.Array("parts")) {
    JsonFields p(part, "parts[]");
    fresh.parts.push_back({p.String("name"), p.Int("lines"), p.Int("errors")});
    if (!p.ok()) return DataLossError(what + ": " + p.error());
  }
  if (!f.ok()) return DataLossError(what + ": " + f.error());
  return fresh;
}

// Deletes the parts progress.json does not name: a run killed between the two writes left them.
Status DropUnlistedParts(ObjectStore& out, const PredictRecord& record) {
  std::set<std::string> listed;
  for (const FinishedPart& part : record.parts) listed.insert(part.name);
  REEL_ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects, storage::ListAll(out, "part-"));
  for (const storage::ObjectInfo& o : objects) {
    const bool part = o.key.size() > 6 && o.key.compare(o.key.size() - 6, 6, ".jsonl") == 0;
    if (part && !listed.count(o.key)) REEL_RETURN_IF_ERROR(out.Delete(o.key));
  }
  return Status::Ok();
}

// The keys of the finished parts. DataLoss when a part is missing or not what progress.json says.
Result<std::set<std::string>> FinishedKeys(ObjectStore& out, const PredictRecord& record) {
  std::set<std::string> keys;
  for (const FinishedPart& part : record.parts) {
    const std::string what = storage::ObjectUri(out, part.name);
    Result<std::string> text = out.Get(part.name);
    if (!text.ok())
      return DataLossError("progress.json lists " + what + ": " + text.status().ToString());
    std::istringstream in(*text);
    int64_t lines = 0;
    for (std::string line; std::getline(in, line);) {
      const json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
      const auto key = doc.find("key");
      if (key == doc.end() || !key->is_string()) {
        return DataLossError(what + ":" + std::to_string(lines + 1) + ": not a prediction line");
      }
      keys.insert(key->get<std::string>());
      ++lines;
    }
    if (lines != part.lines) {
      return DataLossError(what + " holds " + std::to_string(lines) +
                           " lines; progress.json says " + std::to_string(part.lines));
    }
  }
  return keys;
}

// Collects lines; a full part is put whole, then progress.json is rewritten to name it.
class PartWriter {
 public:
  PartWriter(ObjectStore& out, PredictRecord* record, int part_size)
      : out_(out), record_(record), part_size_(part_size) {}

  Status Add(const PredictedLine& line) {
    buffer_ += line.text;
    buffer_ += '\n';
    ++part_.lines;
    part_.errors += line.error ? 1 : 0;
    return part_.lines >= part_size_ ? Flush() : Status::Ok();
  }

  Status Flush() {
    if (part_.lines == 0) return Status::Ok();
    char name[32];
    std::snprintf(name, sizeof(name), "part-%05zu.jsonl", record_->parts.size());
    part_.name = name;
    REEL_RETURN_IF_ERROR(out_.Put(part_.name, buffer_));
    REEL_SYNC_POINT("Predict:PartWritten");
    record_->parts.push_back(part_);
    REEL_RETURN_IF_ERROR(out_.Put(kProgressKey, SerializeRecord(*record_)));
    REEL_SYNC_POINT("Predict:ProgressWritten");
    Logger("predict")->debug("{}: {} lines, {} errors", part_.name, part_.lines, part_.errors);
    buffer_.clear();
    part_ = {};
    return Status::Ok();
  }

 private:
  ObjectStore& out_;
  PredictRecord* record_;
  int64_t part_size_;
  std::string buffer_;
  FinishedPart part_;
};

// The inputs `pending` through `workers` decoding threads and the batcher, lines in listing order.
Status ScoreInputs(const PredictListing& listing, const std::vector<const PredictInput*>& pending,
                   const PredictOptions& o, int workers, Model& model, PartWriter& writer,
                   PredictSummary* summary) {
  const ModelInfo& info = model.info();
  BatcherOptions batching;
  batching.max_batch = o.max_batch;
  batching.instances = o.instances;
  batching.max_queue = std::max(256, 2 * workers);
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batcher,
                        Batcher::Start(batching, info.sample_size(), info.num_classes(),
                                       [&model](int, const float* input, int64_t n) {
                                         return model.Forward(input, n);
                                       }));
  ThreadPool pool(static_cast<size_t>(workers));
  OrderedMap<Result<PredictedLine>> lines(&pool, 2 * static_cast<size_t>(workers), [&](size_t i) {
    return PredictOne(listing, *pending[i], *batcher, info, o);
  });
  lines.Reset(0, pending.size());
  while (lines.HasNext()) {
    Result<PredictedLine> line = lines.Next();
    REEL_RETURN_IF_ERROR(line);
    ++summary->predicted;
    summary->failed += line->error ? 1 : 0;
    REEL_RETURN_IF_ERROR(writer.Add(*line));
  }
  return writer.Flush();
}

}  // namespace

Status PredictOptions::Validate() const {
  if (input.empty()) return InvalidArgumentError("no input to predict");
  if (output.empty() && output_store == nullptr) return InvalidArgumentError("no output folder");
  const std::pair<const char*, std::pair<int, int>> checks[] = {
      {"top_k", {top_k, 1}},         {"clips", {clips, 0}},         {"workers", {workers, 0}},
      {"instances", {instances, 1}}, {"max_batch", {max_batch, 1}}, {"part_size", {part_size, 1}}};
  for (const auto& [name, value] : checks) {
    if (value.first < value.second) {
      return InvalidArgumentError(std::string(name) + " must be at least " +
                                  std::to_string(value.second) + ", not " +
                                  std::to_string(value.first));
    }
  }
  return Status::Ok();
}

Result<PredictSummary> Predict(const PredictOptions& o, Model& model) {
  REEL_RETURN_IF_ERROR(o.Validate());
  const int workers = o.workers > 0
                          ? o.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  REEL_ASSIGN_OR_RETURN(PredictListing listing, ListPredictInputs(o.input, workers));
  std::unique_ptr<ObjectStore> opened;
  if (o.output_store == nullptr) {
    REEL_ASSIGN_OR_RETURN(opened, storage::OpenStore(o.output));
  }
  ObjectStore& out = o.output_store != nullptr ? *o.output_store : *opened;

  const ModelInfo& info = model.info();
  PredictRecord fresh;
  fresh.model = {{"name", info.name}, {"version", info.version}, {"source", info.source}};
  fresh.settings = {{"top_k", o.top_k},
                    {"clips", o.clips > 0 ? o.clips : info.video.clips},
                    {"timeline", o.timeline}};
  REEL_ASSIGN_OR_RETURN(PredictRecord record, LoadRecord(out, std::move(fresh)));
  REEL_RETURN_IF_ERROR(DropUnlistedParts(out, record));
  REEL_ASSIGN_OR_RETURN(std::set<std::string> done, FinishedKeys(out, record));
  std::vector<const PredictInput*> pending;
  for (const PredictInput& in : listing.inputs) {
    if (!done.count(in.key)) pending.push_back(&in);
  }
  record.complete = false;
  REEL_RETURN_IF_ERROR(out.Put(kProgressKey, SerializeRecord(record)));

  PredictSummary summary;
  summary.output = out.uri();
  summary.listed = static_cast<int64_t>(listing.inputs.size());
  summary.earlier = summary.listed - static_cast<int64_t>(pending.size());
  PartWriter writer(out, &record, o.part_size);
  REEL_RETURN_IF_ERROR(ScoreInputs(listing, pending, o, workers, model, writer, &summary));
  record.complete = true;
  REEL_RETURN_IF_ERROR(out.Put(kProgressKey, SerializeRecord(record)));
  summary.parts = static_cast<int64_t>(record.parts.size());
  return summary;
}

}  // namespace reel::serve
