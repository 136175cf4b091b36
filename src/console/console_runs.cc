// /ui/api/runs... and /ui/api/datasets...: what `reel train` and `reel ingest` left in folders.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "base/files.h"
#include "base/json.h"
#include "base/strings.h"
#include "console/console_internal.h"
#include "dataset/frames_codec.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "media/decoder.h"
#include "media/encoder.h"
#include "media/scaler.h"
#include "storage/open.h"

namespace reel::console {
namespace {

namespace fs = std::filesystem;
using http::Request;
using http::Response;
using registry::Role;

constexpr int64_t kLiveMs = 30'000;  // a run that wrote within this and has not finished is live
constexpr size_t kWrongShown = 50;

// `name` as a folder under `root`, refusing names that climb out of it.
Result<std::string> RunFolder(const std::string& root, const std::string& name) {
  if (root.empty()) return NotFoundError("no runs folder is configured (--runs)");
  const fs::path rel(name);
  const bool climbs =
      std::any_of(rel.begin(), rel.end(), [](const fs::path& p) { return p == ".."; });
  if (name.empty() || rel.is_absolute() || climbs) {
    return InvalidArgumentError("run '" + name + "': expected a path inside the runs folder");
  }
  return name == "." ? root : root + "/" + name;
}

std::string RunName(const std::string& root, const std::string& folder) {
  const std::string rel = fs::path(folder).lexically_relative(root).string();
  return rel.empty() ? "." : rel;
}

double Last(const std::vector<double>& v) { return v.empty() ? std::nan("") : v.back(); }

nlohmann::json RunSummary(const std::string& root, const std::string& folder, const RunData& d) {
  const bool finished = !d.evals.empty() && d.evals.back().event == "final_eval";
  const EvalPoint* eval = d.evals.empty() ? nullptr : &d.evals.back();
  return {{"name", RunName(root, folder)},
          {"dir", folder},
          {"last_step", Num(Last(d.series.step))},
          {"epoch", Num(Last(d.series.epoch))},
          {"loss", Num(Last(d.series.loss))},
          {"lr", Num(Last(d.series.lr))},
          {"clips_per_s", Num(Last(d.series.clips_per_s))},
          {"input_wait_share", Num(Last(d.series.input_wait_share))},
          {"top1", eval ? Num(eval->top1) : nlohmann::json(nullptr)},
          {"top5", eval ? Num(eval->top5) : nlohmann::json(nullptr)},
          {"updated_ms", d.modified_ms},
          {"live", !finished && sched::NowUnixMs() - d.modified_ms < kLiveMs},
          {"finished", finished},
          {"points", d.series.size()}};
}

Result<Response> ListRuns(Console::State* st) {
  const std::string& root = st->options.runs;
  nlohmann::json runs = nlohmann::json::array();
  if (!root.empty()) {
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> folders, FindRunFolders(root));
    for (const std::string& folder : folders) {
      Result<std::shared_ptr<const RunData>> data = st->runs.Read(folder);
      if (data.ok()) runs.push_back(RunSummary(root, folder, **data));
    }
  }
  std::stable_sort(runs.begin(), runs.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["updated_ms"].get<int64_t>() > b["updated_ms"].get<int64_t>();
  });
  return Response::Json(200, {{"runs", std::move(runs)}});
}

// The series after step `since`, thinned to `max_points` (by loss, so spikes stay).
nlohmann::json SeriesJson(const RunSeries& s, double since, size_t max_points) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!(s.step[i] <= since)) rows.push_back(i);
  }
  std::vector<double> loss(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) loss[i] = s.loss[rows[i]];
  const std::vector<size_t> kept = ThinIndices(loss, max_points);
  const auto column = [&](const std::vector<double>& values) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t k : kept) out.push_back(Num(values[rows[k]]));
    return out;
  };
  return {{"step", column(s.step)},
          {"wall_s", column(s.wall_s)},
          {"epoch", column(s.epoch)},
          {"loss", column(s.loss)},
          {"lr", column(s.lr)},
          {"clips_per_s", column(s.clips_per_s)},
          {"input_wait_share", column(s.input_wait_share)},
          {"grad_norm", column(s.grad_norm)}};
}

Result<double> NumberParam(const Request& r, const std::string& key, double fallback) {
  auto it = r.query.find(key);
  if (it == r.query.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) {
    return InvalidArgumentError(key + "=" + it->second + ": expected a number");
  }
  return v;
}

Result<Response> RunMetrics(Console::State* st, const Request& r) {
  REEL_ASSIGN_OR_RETURN(std::string folder, RunFolder(st->options.runs, r.params.at("run")));
  REEL_ASSIGN_OR_RETURN(double since, NumberParam(r, "since", -1));
  REEL_ASSIGN_OR_RETURN(double max_points, NumberParam(r, "max_points", 2000));
  if (max_points < 0) return InvalidArgumentError("max_points: expected 0 or more");
  REEL_ASSIGN_OR_RETURN(std::shared_ptr<const RunData> d, st->runs.Read(folder));
  nlohmann::json evals = nlohmann::json::array(), checkpoints = nlohmann::json::array();
  for (const EvalPoint& e : d->evals) {
    evals.push_back({{"step", e.step},
                     {"epoch", e.epoch},
                     {"event", e.event},
                     {"top1", Num(e.top1)},
                     {"top5", Num(e.top5)},
                     {"video_top1", Num(e.video_top1)},
                     {"wall_s", Num(e.wall_s)}});
  }
  for (const CheckpointPoint& c : d->checkpoints) {
    checkpoints.push_back(
        {{"step", c.step}, {"seconds", Num(c.seconds)}, {"wall_s", Num(c.wall_s)}});
  }
  return Response::Json(200,
                        {{"run", r.params.at("run")},
                         {"last_step", Num(Last(d->series.step))},
                         {"total_points", d->series.size()},
                         {"malformed_lines", d->malformed},
                         {"series", SeriesJson(d->series, since, static_cast<size_t>(max_points))},
                         {"evals", std::move(evals)},
                         {"checkpoints", std::move(checkpoints)}});
}

// The report without every video's verdict: the wrong ones only, at most kWrongShown.
nlohmann::json TrimReport(nlohmann::json report) {
  nlohmann::json wrong = nlohmann::json::array();
  const auto it = report.find("predictions");
  if (it != report.end() && it->is_array()) {
    for (const nlohmann::json& p : *it) {
      // Compared as JSON values: a file of another shape gives no match rather than a throw.
      if (wrong.size() < kWrongShown && p.is_object() && p.contains("label") &&
          p["label"] != p.value("predicted", nlohmann::json())) {
        wrong.push_back(p);
      }
    }
  }
  report.erase("predictions");
  report["wrong"] = std::move(wrong);
  return report;
}

Result<Response> RunEval(Console::State* st, const Request& r) {
  REEL_ASSIGN_OR_RETURN(std::string folder, RunFolder(st->options.runs, r.params.at("run")));
  REEL_ASSIGN_OR_RETURN(std::shared_ptr<const RunData> d, st->runs.Read(folder));
  nlohmann::json report;
  if (!d->evals.empty()) {
    REEL_ASSIGN_OR_RETURN(report, RunReader::ReadEvalLine(folder, d->evals.back()));
    report["step"] = d->evals.back().step;
  } else {
    Result<std::string> text = ReadFileToString(folder + "/eval.json", "evaluation report");
    if (!text.ok()) return NotFoundError("run " + r.params.at("run") + " has no evaluation yet");
    REEL_ASSIGN_OR_RETURN(report, ParseJson(*text, folder + "/eval.json"));
  }
  return Response::Json(200, TrimReport(std::move(report)));
}

nlohmann::json Checkpoints(const std::string& folder) {
  nlohmann::json out = nlohmann::json::array();
  std::error_code ec;
  for (fs::directory_iterator it(folder + "/checkpoints", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_directory(ec) || name.rfind("step-", 0) != 0) continue;
    out.push_back({{"step", ParseInt64(name.substr(5)).value_or(-1)},
                   {"uri", it->path().string()},
                   {"bytes", TreeBytes(it->path().string())}});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a["step"] < b["step"]; });
  return out;
}

Result<Response> RunConfig(Console::State* st, const Request& r) {
  REEL_ASSIGN_OR_RETURN(std::string folder, RunFolder(st->options.runs, r.params.at("run")));
  if (!fs::exists(folder + "/metrics.jsonl")) return NotFoundError("no run at " + folder);
  nlohmann::json checkpoints = Checkpoints(folder);
  Result<std::string> config = ReadFileToString(folder + "/config.yaml", "config");
  if (!config.ok() && !checkpoints.empty()) {  // runs from before run folders kept their config
    config = ReadFileToString(checkpoints.back()["uri"].get<std::string>() + "/config.yaml");
  }
  return Response::Json(200, {{"config", config.ok() ? nlohmann::json(*config) : nullptr},
                              {"checkpoints", std::move(checkpoints)}});
}

// --- datasets ---------------------------------------------------------------------------------

constexpr int kDatasetDepth = 6;  // as runs: a pipeline's outputs sit 5 folders down

// Datasets under every root, each once.
std::vector<std::string> FindDatasets(const std::vector<std::string>& roots) {
  std::vector<std::string> out;
  for (const std::string& root : roots) {
    Result<std::vector<std::string>> found =
        FindFoldersHolding(root, "manifest.json", kDatasetDepth);
    if (found.ok()) out.insert(out.end(), found->begin(), found->end());  // a missing root: none
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

nlohmann::json SkippedVideos(const std::string& folder) {
  nlohmann::json out = nlohmann::json::array();
  Result<std::string> text = ReadFileToString(folder + "/ingest_report.json", "ingest report");
  if (!text.ok()) return out;
  Result<nlohmann::json> report = ParseJson(*text, folder + "/ingest_report.json");
  if (!report.ok()) return out;
  // Values are passed on as written (no conversion that could throw on a file of another shape).
  const auto add = [&](const char* list, const char* uri_key) {
    const auto it = report->find(list);
    if (it == report->end() || !it->is_array()) return;
    for (const nlohmann::json& f : *it) {
      if (!f.is_object()) continue;
      out.push_back({{"uri", f.value(uri_key, nlohmann::json())},
                     {"reason", f.value("reason", nlohmann::json())}});
    }
  };
  add("failed", "video");
  add("missing", "reference");
  return out;
}

Result<nlohmann::json> DatasetJson(const std::string& folder, bool whole) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(folder + "/manifest.json", "manifest"));
  REEL_ASSIGN_OR_RETURN(dataset::Manifest m,
                        dataset::Manifest::Parse(text, folder + "/manifest.json"));
  nlohmann::json splits = nlohmann::json::object(), shards = nlohmann::json::object();
  for (const auto& [name, split] : m.splits) {
    splits[name] = {{"records", split.records},
                    {"bytes", split.bytes},
                    {"shards", split.shards.size()},
                    {"class_counts", split.class_counts}};
    nlohmann::json& list = shards[name] = nlohmann::json::array();
    for (const dataset::ShardEntry& s : split.shards) {
      list.push_back({{"name", s.name}, {"records", s.records}, {"tar_bytes", s.tar_bytes}});
    }
  }
  nlohmann::json skipped = SkippedVideos(folder);
  nlohmann::json out = {{"name", m.name},
                        {"uri", folder},
                        {"mode", std::string(dataset::DatasetModeName(m.mode))},
                        {"classes", m.classes},
                        {"splits", std::move(splits)},
                        {"skipped", skipped.size()}};
  if (whole) {
    out["shards"] = std::move(shards);
    out["skipped_videos"] = std::move(skipped);
    out["clip_settings"] = m.clip_settings;
  }
  return out;
}

Result<std::string> DatasetAt(Console::State* st, const Request& r) {
  const std::vector<std::string> found = FindDatasets(st->options.datasets);
  const std::string& text = r.params.at("index");
  const std::optional<int64_t> i = ParseInt64(text);
  if (!i || *i < 0 || static_cast<size_t>(*i) >= found.size()) {
    return NotFoundError("no dataset " + text + " (there are " + std::to_string(found.size()) +
                         ")");
  }
  return found[static_cast<size_t>(*i)];
}

// --- clip previews ----------------------------------------------------------------------------

constexpr int kPreviewFrames = 16, kPreviewShortSide = 96, kPreviewFps = 8;

// Record `nth` (from 0) of class `label` in `split`, reading shard indexes until one holds it.
Result<std::optional<dataset::Record>> NthOfClass(storage::ObjectStore& store,
                                                  const std::string& root, const std::string& split,
                                                  const dataset::SplitInfo& info, int label,
                                                  int64_t nth) {
  for (const dataset::ShardEntry& shard : info.shards) {
    const std::optional<uint32_t> number = dataset::ParseShardName(shard.name);
    if (!number) return DataLossError("bad shard name '" + shard.name + "' in split " + split);
    REEL_ASSIGN_OR_RETURN(auto reader, dataset::ShardReader::Open(store, root, split, *number));
    const auto& records = reader->index().records;
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].label != label || nth-- > 0) continue;
      REEL_ASSIGN_OR_RETURN(dataset::Record record, reader->ReadRecord(i));
      return std::optional<dataset::Record>(std::move(record));
    }
  }
  return std::optional<dataset::Record>();
}

// The clip's first frames, decoded by the media layer at preview size.
Result<std::vector<media::Frame>> PreviewFrames(const dataset::Record& record) {
  std::vector<media::Frame> frames;
  if (record.payload_ext == "mp4") {
    media::DecodeOptions options;
    options.short_side = kPreviewShortSide;
    REEL_ASSIGN_OR_RETURN(
        auto decoder,
        media::VideoDecoder::Open(media::Input::View(record.payload, record.key), options));
    REEL_RETURN_IF_ERROR(decoder->ForEachFrame(
        [&](media::Frame&& f) {
          frames.push_back(std::move(f));
          return Status::Ok();
        },
        0, std::min<int64_t>(kPreviewFrames, decoder->info().frame_count)));
  } else {
    REEL_ASSIGN_OR_RETURN(frames, dataset::DecodeFramesToFrames(record.payload));
    if (frames.size() > kPreviewFrames) frames.resize(kPreviewFrames);
  }
  if (frames.empty()) return DataLossError("clip " + record.key + " has no frames");
  return frames;
}

Result<std::string> AnimatedPng(const std::vector<media::Frame>& frames) {
  media::EncoderOptions options;
  options.codec = options.container = "apng";
  options.width = frames[0].width;
  options.height = frames[0].height;
  options.fps_num = kPreviewFps;
  REEL_ASSIGN_OR_RETURN(auto encoder, media::VideoEncoder::Create(options));
  for (const media::Frame& f : frames) {
    if (f.format == media::PixelFormat::kRgb24) {
      REEL_RETURN_IF_ERROR(encoder->Add(f));
    } else {
      REEL_ASSIGN_OR_RETURN(media::Frame rgb, media::ConvertFormat(f, media::PixelFormat::kRgb24));
      REEL_RETURN_IF_ERROR(encoder->Add(rgb));
    }
  }
  return encoder->Finish();
}

// Clip `nth` of the class, counting through the splits in name order.
Result<std::string> MakePreview(const std::string& folder, const std::string& class_text,
                                int64_t nth) {
  REEL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(folder + "/manifest.json", "manifest"));
  REEL_ASSIGN_OR_RETURN(dataset::Manifest m,
                        dataset::Manifest::Parse(text, folder + "/manifest.json"));
  const std::optional<int64_t> label = ParseInt64(class_text);
  if (!label || *label < 0 || *label >= static_cast<int64_t>(m.classes.size())) {
    return NotFoundError("class " + class_text + ": the dataset has classes 0.." +
                         std::to_string(m.classes.size()) + " (exclusive)");
  }
  if (m.mode == dataset::DatasetMode::kFeatures) {
    return NotFoundError("a features dataset holds embeddings, not clips");
  }
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(folder));
  for (const auto& [split, info] : m.splits) {
    const auto in_split = static_cast<size_t>(*label) < info.class_counts.size()
                              ? static_cast<int64_t>(info.class_counts[*label])
                              : 0;
    if (nth >= in_split) {
      nth -= in_split;
      continue;
    }
    REEL_ASSIGN_OR_RETURN(auto record,
                          NthOfClass(*store, "", split, info, static_cast<int>(*label), nth));
    if (!record)
      return DataLossError("the manifest of " + folder + " counts clips its shards lack");
    REEL_ASSIGN_OR_RETURN(std::vector<media::Frame> frames, PreviewFrames(*record));
    return AnimatedPng(frames);
  }
  return NotFoundError("no clip " + std::to_string(nth) + " of class " + m.classes[*label] +
                       " in " + folder);
}

}  // namespace

Status AddRunRoutes(Console::State* st, http::Router* router) {
  const auto get = [&](const char* path, auto fn) {
    return router->Add(
        "GET", path,
        st->Api(Role::kReader, [st, fn](const Caller&, const Request& r) { return fn(st, r); }));
  };
  REEL_RETURN_IF_ERROR(
      get("/ui/api/runs", [](Console::State* s, const Request&) { return ListRuns(s); }));
  REEL_RETURN_IF_ERROR(get("/ui/api/runs/{run}/metrics", RunMetrics));
  REEL_RETURN_IF_ERROR(get("/ui/api/runs/{run}/eval", RunEval));
  return get("/ui/api/runs/{run}/config", RunConfig);
}

Status AddDatasetRoutes(Console::State* st, http::Router* router) {
  REEL_RETURN_IF_ERROR(router->Add(
      "GET", "/ui/api/datasets",
      st->Api(Role::kReader, [st](const Caller&, const Request&) -> Result<Response> {
        nlohmann::json out = nlohmann::json::array();
        for (const std::string& folder : FindDatasets(st->options.datasets)) {
          Result<nlohmann::json> d = DatasetJson(folder, false);
          out.push_back(d.ok() ? std::move(*d)
                               : nlohmann::json{{"uri", folder}, {"error", d.status().message()}});
        }
        return Response::Json(200, {{"datasets", std::move(out)}});
      })));
  REEL_RETURN_IF_ERROR(router->Add(
      "GET", "/ui/api/datasets/{index}/preview/{class}",
      st->Api(Role::kReader, [st](const Caller&, const Request& r) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(std::string folder, DatasetAt(st, r));
        REEL_ASSIGN_OR_RETURN(double clip, NumberParam(r, "clip", 0));
        if (clip < 0 || clip != std::floor(clip)) {
          return InvalidArgumentError("clip: expected a clip number from 0");
        }
        const auto nth = static_cast<int64_t>(clip);
        REEL_ASSIGN_OR_RETURN(std::string png,
                              st->Preview(folder, r.params.at("class") + "/" + std::to_string(nth),
                                          [&](const std::string& f, const std::string&) {
                                            return MakePreview(f, r.params.at("class"), nth);
                                          }));
        Response answer;
        answer.headers["Content-Type"] = "image/apng";
        answer.headers["Cache-Control"] = "private, max-age=3600";
        answer.body = std::move(png);
        return answer;
      })));
  return router->Add(
      "GET", "/ui/api/datasets/{index}",
      st->Api(Role::kReader, [st](const Caller&, const Request& r) -> Result<Response> {
        REEL_ASSIGN_OR_RETURN(std::string folder, DatasetAt(st, r));
        REEL_ASSIGN_OR_RETURN(nlohmann::json d, DatasetJson(folder, true));
        return Response::Json(200, d);
      }));
}

}  // namespace reel::console
