#include "ingest/pipeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/hash.h"
#include "base/logging.h"
#include "base/ordered_map.h"
#include "base/progress.h"
#include "base/random.h"
#include "base/uri.h"
#include "dataset/layout.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "dataset/shard_writer.h"
#include "ingest/run_state.h"
#include "storage/object_store.h"
#include "storage/open.h"

namespace reel::ingest {
namespace {

using internal::Position;
using internal::RunState;
using internal::SplitState;
using nlohmann::json;
constexpr const char* kStateKey = "_ingest/state.json";
constexpr const char* kReportKey = "ingest_report.json";
constexpr uint64_t kVideoOrderStream = 1;  // base/random.h stream of the shuffled video order

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

using Clips = Result<std::vector<dataset::Record>>;

// One ingest, as named stages that Go runs in order. Each stage fills in the members the
// later ones read; the first error ends the run.
class IngestRun {
 public:
  explicit IngestRun(const IngestOptions& options) : o_(options), log_(Logger("ingest")) {}

  Result<IngestReport> Go() {
    REEL_RETURN_IF_ERROR(Validate());
    REEL_RETURN_IF_ERROR(ListSource());
    REEL_RETURN_IF_ERROR(OpenOutput());
    REEL_ASSIGN_OR_RETURN(bool complete, FindEarlierDataset());
    if (complete) return report_;
    REEL_RETURN_IF_ERROR(LoadState());
    REEL_RETURN_IF_ERROR(OpenWriters());
    PlanRemaining();
    REEL_RETURN_IF_ERROR(MakeAndCommitClips());
    REEL_RETURN_IF_ERROR(FinishDataset());
    return report_;
  }

 private:
  Status Validate() {
    REEL_RETURN_IF_ERROR(ValidateClipSettings(o_.clip));
    if (o_.shard_bytes < (64u << 10)) {
      return InvalidArgumentError("shard size must be at least 64 KiB");
    }
    if (o_.output.empty() && o_.output_store == nullptr) {
      return InvalidArgumentError("no output URI");
    }
    return Status::Ok();
  }

  // The listing, in the seeded order; sample keys derive from video keys relative to its folder.
  Status ListSource() {
    REEL_ASSIGN_OR_RETURN(source_, storage::OpenObjectUri(o_.source));
    REEL_ASSIGN_OR_RETURN(listing_, ListSources(*source_.store, source_.key));
    if (listing_.videos.empty()) {
      return NotFoundError("no videos to ingest in " + o_.source + " (" +
                           std::to_string(listing_.missing.size()) + " listed but missing)");
    }
    if (o_.shuffle) ShuffleVideos(&listing_.videos, o_.shuffle_seed);
    listing_root_ = source_.key;
    if (listing_.format != "ucf101") {
      size_t slash = listing_root_.rfind('/');
      listing_root_ = slash == std::string::npos ? "" : listing_root_.substr(0, slash);
    }
    return Status::Ok();
  }

  Status OpenOutput() {
    if (o_.output_store == nullptr) {
      REEL_ASSIGN_OR_RETURN(opened_, storage::OpenStore(o_.output));
    }
    out_ = o_.output_store ? o_.output_store : opened_.get();
    settings_ = SettingsJson(o_);
    report_.output = out_->uri();
    report_.videos_listed = static_cast<int64_t>(listing_.videos.size());
    report_.missing = listing_.missing;
    return Status::Ok();
  }

  // True when the same sources and settings already made a complete dataset here; an other
  // dataset is replaced only with --overwrite.
  Result<bool> FindEarlierDataset() {
    auto existing = dataset::Manifest::Read(*out_, "");
    if (!existing.ok()) {
      if (existing.status().code() == StatusCode::kNotFound) return false;
      return existing.status();
    }
    if (existing->source_hash == listing_.hash && existing->clip_settings == settings_) {
      report_.already_complete = true;
      for (const auto& [split, info] : existing->splits) {
        report_.clips[split] = static_cast<int64_t>(info.records);
      }
      report_.videos_resumed = report_.videos_listed;
      return true;
    }
    if (!o_.overwrite) {
      return AlreadyExistsError("a dataset made from other sources or settings is already at " +
                                out_->uri() + "; pass --overwrite to replace it");
    }
    REEL_RETURN_IF_ERROR(ClearOutput(*out_));
    return false;
  }

  // An unfinished run of the same sources and settings is resumed; another one is discarded
  // only with --restart.
  Status LoadState() {
    state_.source_hash = listing_.hash;
    state_.settings = settings_;
    auto saved = out_->Get(kStateKey);
    if (!saved.ok()) {
      return saved.status().code() == StatusCode::kNotFound ? Status::Ok() : saved.status();
    }
    REEL_ASSIGN_OR_RETURN(RunState previous,
                          RunState::FromJson(*saved, storage::ObjectUri(*out_, kStateKey)));
    if (previous.source_hash == listing_.hash && previous.settings == settings_) {
      state_ = std::move(previous);
      log_->info("resuming the ingest at {}", out_->uri());
      return Status::Ok();
    }
    if (o_.restart) return ClearOutput(*out_);
    return FailedPreconditionError(
        "an unfinished ingest with other sources or settings is at " + out_->uri() +
        "; rerun it with the same ones, or pass --restart to discard it");
  }

  // One shard writer per split, continuing after the finished shards.
  Status OpenWriters() {
    std::set<std::string> split_names;
    for (const auto& video : listing_.videos) split_names.insert(video.split);
    for (const std::string& split : split_names) REEL_RETURN_IF_ERROR(OpenWriter(split));
    return Status::Ok();
  }

  Status OpenWriter(const std::string& split) {
    SplitState& s = state_.splits[split];
    // Shards past the checkpoint were written by a run that stopped before recording them; they
    // are rewritten, so remove them first (index before tar: a tar alone is unfinished).
    REEL_ASSIGN_OR_RETURN(auto numbers, dataset::ListShards(*out_, "", split));
    for (uint32_t number : numbers) {
      if (number >= s.shards) REEL_RETURN_IF_ERROR(DeleteShard(*out_, split, number));
    }
    // The finished shards' keys are claimed so that none is written again.
    REEL_ASSIGN_OR_RETURN(auto keep, dataset::LoadShardStats(*out_, "", split, keys_.get()));
    if (keep.size() != s.shards) {
      return DataLossError(out_->uri() + "/" + split + ": the checkpoint names " +
                           std::to_string(s.shards) + " finished shards but " +
                           std::to_string(keep.size()) + " are there");
    }
    finished_[split] = std::move(keep);
    dataset::ShardWriterOptions wo;
    wo.mode = o_.encode.mode;
    wo.target_bytes = o_.shard_bytes;
    wo.first_shard = s.shards;
    wo.keys = keys_;
    wo.on_shard_published = [this, split](const dataset::ShardStats& shard) {
      SplitState& st = state_.splits[split];
      st.shards = shard.number + 1;
      st.next = pending_[split];
      report_.bytes_written += shard.tar_bytes + shard.index_bytes;
      SaveState();
    };
    REEL_ASSIGN_OR_RETURN(writers_[split], dataset::ShardWriter::Create(*out_, "", split, wo));
    return Status::Ok();
  }

  // Records the state after a published shard; the first failure ends the run at the next video.
  void SaveState() {
    Status status = out_->Put(kStateKey, state_.ToJson());
    if (!status.ok() && save_error_.ok()) save_error_ = status;
  }

  // What is left to do, in listing order. Keys are derived for every video so that they do not
  // depend on where a run stopped; failures before the resume point stay reported.
  void PlanRemaining() {
    std::set<std::string> used_bases;
    for (const auto& video : listing_.videos) {
      key_bases_.push_back(KeyBase(video, listing_root_, &used_bases));
    }
    std::vector<std::pair<int64_t, FailedVideo>> kept_failures;
    for (const auto& entry : state_.failed) {
      const SourceVideo& v = listing_.videos[static_cast<size_t>(entry.first)];
      if (entry.first < state_.splits[v.split].next.video) kept_failures.push_back(entry);
    }
    state_.failed = std::move(kept_failures);
    for (size_t i = 0; i < listing_.videos.size(); ++i) {
      const Position& next = state_.splits[listing_.videos[i].split].next;
      if (static_cast<int64_t>(i) < next.video) {
        ++report_.videos_resumed;
      } else {
        remaining_.push_back(i);
      }
    }
  }

  // Workers make the clips of the remaining videos in parallel; this thread commits them to the
  // shard writers in listing order, so the dataset does not depend on the worker count.
  static constexpr int kVideosAheadPerWorker = 8;

  Status MakeAndCommitClips() {
    const int workers = o_.workers > 0
                            ? o_.workers
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(static_cast<size_t>(workers));
    // Videos are committed in listing order, so a long one holds the window until it is done:
    // with only 2 per worker the others ran out of work behind a 1080p clip (30% idle in
    // bench/ingest_bench). A wider window costs only the encoded clips it holds.
    OrderedMap<Clips> clips(&pool, static_cast<size_t>(kVideosAheadPerWorker * workers),
                            [this](size_t slot) { return MakeVideoClips(remaining_[slot]); });
    clips.Reset(0, remaining_.size());
    Progress progress("ingest", remaining_.size(), Progress::Unit::kItems, o_.progress);
    progress.SetSecondaryName("clips");
    while (clips.HasNext()) {
      const size_t index = remaining_[clips.next_index()];
      Clips made = clips.Next();
      progress.Add(1);
      Status committed = Commit(index, std::move(made), &progress);
      if (committed.ok()) committed = save_error_;
      if (!committed.ok()) {
        clips.Stop();
        return committed;
      }
    }
    progress.Finish();
    return Status::Ok();
  }

  // Runs on a worker: the clips of listing video `index`, read in place when the store has a
  // local file, else fetched into memory.
  Clips MakeVideoClips(size_t index) {
    const SourceVideo& video = listing_.videos[index];
    ClipJob job;
    job.video = &video;
    job.class_name = listing_.class_names[static_cast<size_t>(video.label)];
    job.key_base = key_bases_[index];
    job.source_uri = storage::ObjectUri(*source_.store, video.key);
    StageTimes spent;
    Clips clips = [&]() -> Clips {
      if (std::optional<std::string> path = source_.store->LocalPath(video.key)) {
        return MakeClips(job, media::Input::File(*path), o_.clip, o_.encode, &spent);
      }
      REEL_ASSIGN_OR_RETURN(std::string bytes, source_.store->Get(video.key));
      return MakeClips(job, media::Input::Memory(std::move(bytes), job.source_uri), o_.clip,
                       o_.encode, &spent);
    }();
    std::lock_guard lock(stages_mu_);
    report_.stages += spent;
    return clips;
  }

  // Adds one video's clips to its split's writer, skipping those an earlier run committed; a
  // video that could not be read is reported, never fatal.
  Status Commit(size_t index, Clips clips, Progress* progress) {
    const SourceVideo& video = listing_.videos[index];
    if (!clips.ok()) {
      FailedVideo failure{storage::ObjectUri(*source_.store, video.key), clips.status().ToString()};
      log_->warn("skipping {}: {}", failure.key, failure.reason);
      state_.failed.emplace_back(static_cast<int64_t>(index), failure);
      return Status::Ok();
    }
    const Position resume = state_.splits[video.split].next;
    dataset::ShardWriter& writer = *writers_[video.split];
    for (size_t c = 0; c < clips->size(); ++c) {
      if (static_cast<int64_t>(index) == resume.video && static_cast<int>(c) < resume.clip) {
        continue;
      }
      pending_[video.split] = Position{static_cast<int64_t>(index), static_cast<int>(c)};
      const auto started = std::chrono::steady_clock::now();
      REEL_RETURN_IF_ERROR(writer.AddRecord((*clips)[c]));
      report_.write_s += SecondsSince(started);
      ++report_.clips_written;
      progress->AddSecondary(1);
    }
    ++report_.videos_ingested;
    pending_[video.split] = Position{static_cast<int64_t>(index) + 1, 0};
    return Status::Ok();
  }

  // The last shard of every split, then the manifest, then the report; the state goes last.
  Status FinishDataset() {
    dataset::Manifest manifest;
    manifest.name = !o_.name.empty() ? o_.name : LastSegment(out_->uri());
    if (manifest.name.empty()) manifest.name = "dataset";
    manifest.mode = o_.encode.mode;
    manifest.classes = listing_.class_names;
    manifest.clip_settings = settings_;
    manifest.source_hash = listing_.hash;
    for (auto& [split, writer] : writers_) {
      pending_[split] = Position{static_cast<int64_t>(listing_.videos.size()), 0};
      const auto started = std::chrono::steady_clock::now();
      REEL_RETURN_IF_ERROR(writer->Finish());
      report_.write_s += SecondsSince(started);
      REEL_RETURN_IF_ERROR(save_error_);
      std::vector<dataset::ShardStats> all = finished_[split];
      all.insert(all.end(), writer->shards().begin(), writer->shards().end());
      if (all.empty()) continue;  // every video of this split failed
      REEL_RETURN_IF_ERROR(manifest.AddSplit(split, all));
      for (const auto& shard : all) report_.clips[split] += static_cast<int64_t>(shard.records);
    }
    for (const auto& [index, failure] : state_.failed) report_.failed.push_back(failure);
    report_.seconds = SecondsSince(started_);
    if (manifest.splits.empty()) {
      return DataLossError("no video of " + o_.source + " could be ingested; first failure: " +
                           (report_.failed.empty() ? "none" : report_.failed[0].reason));
    }
    dataset::ManifestWriteOptions mo;
    mo.mode = dataset::ManifestWriteMode::kReplace;
    REEL_RETURN_IF_ERROR(manifest.Write(*out_, "", mo));
    REEL_RETURN_IF_ERROR(out_->Put(kReportKey, report_.ToJson()));
    // The dataset is complete; a state object left behind costs a rerun only a re-check of its
    // shards, so a failed delete is worth a warning, not a failed ingest.
    if (Status dropped = out_->Delete(kStateKey);
        !dropped.ok() && dropped.code() != StatusCode::kNotFound) {
      log_->warn("could not remove the ingest state {}: {}", kStateKey, dropped.ToString());
    }
    return Status::Ok();
  }

  const IngestOptions& o_;
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  storage::ObjectLocation source_;
  SourceListing listing_;
  std::string listing_root_;
  std::unique_ptr<storage::ObjectStore> opened_;
  storage::ObjectStore* out_ = nullptr;
  json settings_;
  IngestReport report_;
  std::mutex stages_mu_;  // workers add their videos' times to report_.stages under it
  RunState state_;
  std::shared_ptr<dataset::KeyRegistry> keys_ = std::make_shared<dataset::KeyRegistry>();
  std::map<std::string, std::unique_ptr<dataset::ShardWriter>> writers_;
  std::map<std::string, std::vector<dataset::ShardStats>> finished_;  // earlier runs' shards
  std::map<std::string, Position> pending_;  // the record being added, per split
  Status save_error_;
  std::vector<std::string> key_bases_;
  std::vector<size_t> remaining_;  // listing indices still to ingest, in order
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
              {"stages_s",
               {{"open", stages.open_s},
                {"decode", stages.decode_s},
                {"convert", stages.convert_s},
                {"encode", stages.encode_s},
                {"write", write_s}}},
              {"already_complete", already_complete}}
      .dump(2);
}

Result<IngestReport> RunIngest(const IngestOptions& options) { return IngestRun(options).Go(); }

}  // namespace reel::ingest
