#include "ingest/pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "base/hash.h"
#include "base/logging.h"
#include "base/progress.h"
#include "base/random.h"
#include "base/uri.h"
#include "dataset/layout.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "dataset/shard_writer.h"
#include "storage/object_store.h"
#include "storage/open.h"

namespace reel::ingest {
namespace {

using nlohmann::json;
constexpr const char* kStateKey = "_ingest/state.json";
constexpr const char* kReportKey = "ingest_report.json";
constexpr uint64_t kVideoOrderStream = 1;  // base/random.h stream of the shuffled video order

// Where a split's committed records end: every clip before (video, clip) is in a finished shard.
struct Position {
  int64_t video = 0;  // index into the listing
  int clip = 0;
};

struct SplitState {
  uint32_t shards = 0;  // finished shards 0..shards-1
  Position next;
};

struct RunState {
  std::string source_hash;
  json settings;
  std::map<std::string, SplitState> splits;
  std::vector<std::pair<int64_t, FailedVideo>> failed;  // by listing index
};

json SettingsJson(const IngestOptions& o) {
  const ClipSettings& c = o.clip;
  json clip = {{"clip_frames", c.clip_frames}, {"frame_stride", c.frame_stride},
               {"clip_stride", c.clip_stride}, {"fps", c.fps},
               {"short_side", c.short_side},   {"max_clips_per_video", c.max_clips_per_video}};
  json encode = {{"mode", std::string(dataset::DatasetModeName(o.encode.mode))}};
  if (o.encode.mode == dataset::DatasetMode::kVideo) {
    encode["crf"] = o.encode.crf;
    encode["preset"] = o.encode.preset;
  } else {
    encode["zstd_level"] = o.encode.zstd_level;
  }
  json out = {{"clip", clip}, {"encode", encode}, {"shard_bytes", o.shard_bytes}};
  if (o.shuffle) out["shuffle_seed"] = o.shuffle_seed;
  return out;
}

// A portable shuffle (base/random.h), so a dataset's record order is the same on every machine.
void ShuffleVideos(std::vector<SourceVideo>* videos, uint64_t seed) {
  Rng::Stream(seed, kVideoOrderStream).Shuffle(videos);
}

std::string StateToJson(const RunState& state) {
  json splits = json::object();
  for (const auto& [name, s] : state.splits) {
    splits[name] = {{"shards", s.shards}, {"next_video", s.next.video}, {"next_clip", s.next.clip}};
  }
  json failed = json::array();
  for (const auto& [index, f] : state.failed) {
    failed.push_back({{"index", index}, {"key", f.key}, {"reason", f.reason}});
  }
  return json{{"version", 1},
              {"source_hash", state.source_hash},
              {"settings", state.settings},
              {"splits", splits},
              {"failed", failed}}
      .dump(2);
}

Result<RunState> StateFromJson(const std::string& text, const std::string& where) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || doc.value("version", 0) != 1) {
    return DataLossError(where + ": not a Reel ingest state (version 1)");
  }
  RunState state;
  try {
    state.source_hash = doc.at("source_hash").get<std::string>();
    state.settings = doc.at("settings");
    for (const auto& [name, s] : doc.at("splits").items()) {
      SplitState split;
      split.shards = s.at("shards").get<uint32_t>();
      split.next.video = s.at("next_video").get<int64_t>();
      split.next.clip = s.at("next_clip").get<int>();
      state.splits[name] = split;
    }
    for (const auto& f : doc.at("failed")) {
      state.failed.push_back({f.at("index").get<int64_t>(),
                              {f.at("key").get<std::string>(), f.at("reason").get<std::string>()}});
    }
  } catch (const json::exception& e) {
    return DataLossError(where + ": " + e.what());
  }
  return state;
}

// A sample key prefix for a video, unique within the listing, short enough for "_cNNN".
std::string KeyBase(const SourceVideo& video, const std::string& root,
                    std::set<std::string>* used) {
  std::string rel = video.key.substr(root.empty() || video.key.compare(0, root.size(), root) != 0
                                         ? 0
                                         : std::min(video.key.size(), root.size() + 1));
  size_t dot = rel.rfind('.');
  if (dot != std::string::npos && rel.find('/', dot) == std::string::npos) rel.resize(dot);
  if (video.start_s >= 0) rel += "_s" + std::to_string(static_cast<int64_t>(video.start_s * 1000));
  std::string base = dataset::SanitizeSampleKey(rel);
  constexpr size_t kRoom = dataset::kMaxSampleKeyBytes - 10;  // "_c" + up to 5 digits + "_NN"
  if (base.size() > kRoom) base = base.substr(0, kRoom - 17) + "-" + Xxh3_128Hex(rel).substr(0, 16);
  std::string unique = base;
  for (int n = 2; used->count(unique); ++n) unique = base + "_" + std::to_string(n);
  used->insert(unique);
  return unique;
}

// Deletes every object under the dataset root (for overwrite / restart).
Status ClearOutput(storage::ObjectStore& store) {
  REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(store, ""));
  for (const auto& object : objects) REEL_RETURN_IF_ERROR(store.Delete(object.key));
  return Status::Ok();
}

Status DeleteShard(storage::ObjectStore& store, const std::string& split, uint32_t number) {
  REEL_RETURN_IF_ERROR(store.Delete(dataset::ShardIndexKey("", split, number)));
  return store.Delete(dataset::ShardTarKey("", split, number));
}

std::string LastSegment(const std::string& uri) {
  std::string s = uri;
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s.substr(s.rfind('/') + 1);
}

// Results of the workers, handed to the committer in listing order.
class OrderedResults {
 public:
  explicit OrderedResults(size_t window) : window_(window) {}

  // Blocks the worker while it is too far ahead of the committer.
  bool WaitForTurn(size_t slot) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return cancelled_ || slot < consumed_ + window_; });
    return !cancelled_;
  }
  void Put(size_t slot, Result<std::vector<dataset::Record>> result) {
    std::lock_guard lock(mu_);
    results_.emplace(slot, std::move(result));
    cv_.notify_all();
  }
  Result<std::vector<dataset::Record>> Take(size_t slot) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return results_.count(slot) > 0; });
    auto node = results_.extract(slot);
    ++consumed_;
    cv_.notify_all();
    return std::move(node.mapped());
  }
  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<size_t, Result<std::vector<dataset::Record>>> results_;
  size_t consumed_ = 0;
  size_t window_;
  bool cancelled_ = false;
};

}  // namespace

std::string IngestReport::ToJson() const {
  json failed_json = json::array();
  for (const auto& f : failed) failed_json.push_back({{"video", f.key}, {"reason", f.reason}});
  json missing_json = json::array();
  for (const auto& m : missing)
    missing_json.push_back({{"reference", m.reference}, {"reason", m.reason}});
  return json{{"output", output},
              {"videos_listed", videos_listed},
              {"videos_ingested", videos_ingested},
              {"videos_resumed", videos_resumed},
              {"videos_failed", static_cast<int64_t>(failed.size())},
              {"failed", failed_json},
              {"missing", missing_json},
              {"clips", clips},
              {"clips_written", clips_written},
              {"bytes_written", bytes_written},
              {"seconds", seconds},
              {"already_complete", already_complete}}
      .dump(2);
}

Result<IngestReport> RunIngest(const IngestOptions& options) {
  auto log = Logger("ingest");
  const auto started = std::chrono::steady_clock::now();
  REEL_RETURN_IF_ERROR(ValidateClipSettings(options.clip));
  if (options.shard_bytes < (64u << 10)) {
    return InvalidArgumentError("shard size must be at least 64 KiB");
  }
  if (options.output.empty() && options.output_store == nullptr) {
    return InvalidArgumentError("no output URI");
  }

  // Sources.
  REEL_ASSIGN_OR_RETURN(storage::ObjectLocation source, storage::OpenObjectUri(options.source));
  REEL_ASSIGN_OR_RETURN(SourceListing listing, ListSources(*source.store, source.key));
  if (listing.videos.empty()) {
    return NotFoundError("no videos to ingest in " + options.source + " (" +
                         std::to_string(listing.missing.size()) + " listed but missing)");
  }
  if (options.shuffle) ShuffleVideos(&listing.videos, options.shuffle_seed);
  // Sample keys derive from video keys relative to the listing's folder.
  std::string listing_root = source.key;
  if (listing.format != "ucf101") {
    size_t slash = listing_root.rfind('/');
    listing_root = slash == std::string::npos ? "" : listing_root.substr(0, slash);
  }

  // Output and what an earlier run left there.
  std::unique_ptr<storage::ObjectStore> opened;
  if (options.output_store == nullptr) {
    REEL_ASSIGN_OR_RETURN(opened, storage::OpenStore(options.output));
  }
  storage::ObjectStore* out = options.output_store ? options.output_store : opened.get();
  const json settings = SettingsJson(options);
  IngestReport report;
  report.output = out->uri();
  report.videos_listed = static_cast<int64_t>(listing.videos.size());
  report.missing = listing.missing;

  auto existing = dataset::Manifest::Read(*out, "");
  if (existing.ok()) {
    if (existing->source_hash == listing.hash && existing->clip_settings == settings) {
      report.already_complete = true;
      for (const auto& [split, info] : existing->splits)
        report.clips[split] = static_cast<int64_t>(info.records);
      report.videos_resumed = report.videos_listed;
      return report;
    }
    if (!options.overwrite) {
      return AlreadyExistsError("a dataset made from other sources or settings is already at " +
                                out->uri() + "; pass --overwrite to replace it");
    }
    REEL_RETURN_IF_ERROR(ClearOutput(*out));
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }

  RunState state;
  state.source_hash = listing.hash;
  state.settings = settings;
  auto saved = out->Get(kStateKey);
  if (saved.ok()) {
    REEL_ASSIGN_OR_RETURN(RunState previous,
                          StateFromJson(*saved, storage::ObjectUri(*out, kStateKey)));
    if (previous.source_hash == listing.hash && previous.settings == settings) {
      state = std::move(previous);
      log->info("resuming the ingest at {}", out->uri());
    } else if (options.restart) {
      REEL_RETURN_IF_ERROR(ClearOutput(*out));
    } else {
      return FailedPreconditionError(
          "an unfinished ingest with other sources or settings is at " + out->uri() +
          "; rerun it with the same ones, or pass --restart to discard it");
    }
  } else if (saved.status().code() != StatusCode::kNotFound) {
    return saved.status();
  }

  // Shard writers, one per split, continuing after the finished shards.
  auto keys = std::make_shared<dataset::KeyRegistry>();
  std::set<std::string> split_names;
  for (const auto& video : listing.videos) split_names.insert(video.split);
  std::map<std::string, std::unique_ptr<dataset::ShardWriter>> writers;
  std::map<std::string, std::vector<dataset::ShardStats>> finished;  // earlier runs' shards
  std::map<std::string, Position> pending;  // the record being added, per split
  Status checkpoint_error;
  auto checkpoint = [&]() {
    Status status = out->Put(kStateKey, StateToJson(state));
    if (!status.ok() && checkpoint_error.ok()) checkpoint_error = status;
  };
  for (const std::string& split : split_names) {
    SplitState& s = state.splits[split];
    // Shards past the checkpoint were written by a run that stopped before recording them; they
    // are rewritten below, so remove them first (index before tar: a tar alone is unfinished).
    REEL_ASSIGN_OR_RETURN(auto numbers, dataset::ListShards(*out, "", split));
    for (uint32_t number : numbers) {
      if (number >= s.shards) REEL_RETURN_IF_ERROR(DeleteShard(*out, split, number));
    }
    // The finished shards' keys are claimed so that none is written again.
    REEL_ASSIGN_OR_RETURN(auto keep, dataset::LoadShardStats(*out, "", split, keys.get()));
    if (keep.size() != s.shards) {
      return DataLossError(out->uri() + "/" + split + ": the checkpoint names " +
                           std::to_string(s.shards) + " finished shards but " +
                           std::to_string(keep.size()) + " are there");
    }
    finished[split] = std::move(keep);
    dataset::ShardWriterOptions wo;
    wo.mode = options.encode.mode;
    wo.target_bytes = options.shard_bytes;
    wo.first_shard = s.shards;
    wo.keys = keys;
    wo.on_shard_published = [&, split](const dataset::ShardStats& shard) {
      SplitState& st = state.splits[split];
      st.shards = shard.number + 1;
      st.next = pending[split];
      report.bytes_written += shard.tar_bytes + shard.index_bytes;
      checkpoint();
    };
    REEL_ASSIGN_OR_RETURN(writers[split], dataset::ShardWriter::Create(*out, "", split, wo));
  }

  // What is left to do, in listing order; keys are derived for every video so they do not
  // depend on where a run stopped.
  std::set<std::string> used_bases;
  std::vector<std::string> key_bases;
  for (const auto& video : listing.videos)
    key_bases.push_back(KeyBase(video, listing_root, &used_bases));
  std::vector<size_t> remaining;
  std::set<int64_t> failed_before;
  for (const auto& [index, f] : state.failed) {
    const SourceVideo& v = listing.videos[static_cast<size_t>(index)];
    if (index < state.splits[v.split].next.video) failed_before.insert(index);
  }
  std::vector<std::pair<int64_t, FailedVideo>> kept_failures;
  for (auto& entry : state.failed) {
    if (failed_before.count(entry.first)) kept_failures.push_back(entry);
  }
  state.failed = kept_failures;
  for (size_t i = 0; i < listing.videos.size(); ++i) {
    const Position& next = state.splits[listing.videos[i].split].next;
    if (static_cast<int64_t>(i) < next.video) {
      ++report.videos_resumed;
      continue;
    }
    remaining.push_back(i);
  }

  int workers = options.workers > 0
                    ? options.workers
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  OrderedResults results(static_cast<size_t>(2 * workers));
  std::atomic<size_t> next_slot{0};
  auto work = [&] {
    while (true) {
      size_t slot = next_slot++;
      if (slot >= remaining.size() || !results.WaitForTurn(slot)) return;
      const SourceVideo& video = listing.videos[remaining[slot]];
      ClipJob job;
      job.video = &video;
      job.class_name = listing.class_names[static_cast<size_t>(video.label)];
      job.key_base = key_bases[remaining[slot]];
      job.source_uri = storage::ObjectUri(*source.store, video.key);
      Result<std::vector<dataset::Record>> clips = [&]() -> Result<std::vector<dataset::Record>> {
        if (std::optional<std::string> path = source.store->LocalPath(video.key)) {
          return MakeClips(job, media::Input::File(*path), options.clip, options.encode);
        }
        REEL_ASSIGN_OR_RETURN(std::string bytes, source.store->Get(video.key));
        return MakeClips(job, media::Input::Memory(std::move(bytes), job.source_uri), options.clip,
                         options.encode);
      }();
      results.Put(slot, std::move(clips));
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) threads.emplace_back(work);

  Progress progress("ingest", remaining.size(), Progress::Unit::kItems, options.progress);
  progress.SetSecondaryName("clips");
  Status fatal;
  for (size_t slot = 0; slot < remaining.size() && fatal.ok(); ++slot) {
    const size_t index = remaining[slot];
    const SourceVideo& video = listing.videos[index];
    Result<std::vector<dataset::Record>> clips = results.Take(slot);
    progress.Add(1);
    if (!clips.ok()) {
      FailedVideo failure{storage::ObjectUri(*source.store, video.key), clips.status().ToString()};
      log->warn("skipping {}: {}", failure.key, failure.reason);
      state.failed.emplace_back(static_cast<int64_t>(index), failure);
      continue;
    }
    const Position& resume = state.splits[video.split].next;
    dataset::ShardWriter& writer = *writers[video.split];
    for (size_t c = 0; c < clips->size(); ++c) {
      if (static_cast<int64_t>(index) == resume.video && static_cast<int>(c) < resume.clip)
        continue;
      pending[video.split] = Position{static_cast<int64_t>(index), static_cast<int>(c)};
      Status added = writer.AddRecord((*clips)[c]);
      if (!added.ok()) {
        fatal = added;
        break;
      }
      ++report.clips_written;
      progress.AddSecondary(1);
    }
    ++report.videos_ingested;
    pending[video.split] = Position{static_cast<int64_t>(index) + 1, 0};
    if (!checkpoint_error.ok()) fatal = checkpoint_error;
  }
  results.Cancel();
  for (auto& thread : threads) thread.join();
  progress.Finish();
  REEL_RETURN_IF_ERROR(fatal);

  // Finish every split: the last shards, then the manifest, then the report.
  dataset::Manifest manifest;
  manifest.name = !options.name.empty() ? options.name : LastSegment(out->uri());
  if (manifest.name.empty()) manifest.name = "dataset";
  manifest.mode = options.encode.mode;
  manifest.classes = listing.class_names;
  manifest.clip_settings = settings;
  manifest.source_hash = listing.hash;
  for (auto& [split, writer] : writers) {
    pending[split] = Position{static_cast<int64_t>(listing.videos.size()), 0};
    REEL_RETURN_IF_ERROR(writer->Finish());
    REEL_RETURN_IF_ERROR(checkpoint_error);
    std::vector<dataset::ShardStats> all = finished[split];
    all.insert(all.end(), writer->shards().begin(), writer->shards().end());
    if (all.empty()) continue;  // every video of this split failed
    REEL_RETURN_IF_ERROR(manifest.AddSplit(split, all));
    for (const auto& shard : all) report.clips[split] += static_cast<int64_t>(shard.records);
  }
  for (const auto& [index, failure] : state.failed) report.failed.push_back(failure);
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (manifest.splits.empty()) {
    return DataLossError("no video of " + options.source + " could be ingested; first failure: " +
                         (report.failed.empty() ? "none" : report.failed[0].reason));
  }
  dataset::ManifestWriteOptions mo;
  mo.mode = dataset::ManifestWriteMode::kReplace;
  REEL_RETURN_IF_ERROR(manifest.Write(*out, "", mo));
  REEL_RETURN_IF_ERROR(out->Put(kReportKey, report.ToJson()));
  // The dataset is complete; a state object left behind costs a rerun only a re-check of its
  // shards, so a failed delete is worth a warning, not a failed ingest.
  if (Status dropped = out->Delete(kStateKey);
      !dropped.ok() && dropped.code() != StatusCode::kNotFound) {
    Logger("ingest")->warn("could not remove the ingest state {}: {}", kStateKey,
                           dropped.ToString());
  }
  return report;
}

}  // namespace reel::ingest
