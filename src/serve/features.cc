#include "serve/features.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <utility>

#include "base/hash.h"
#include "base/logging.h"
#include "dataset/manifest.h"
#include "dataset/shard_writer.h"
#include "loader/loader.h"
#include "registry/model_uri.h"
#include "storage/open.h"

namespace reel::serve {

Status FeatureOptions::Validate() const {
  if (dataset.empty()) return InvalidArgumentError("features: no input dataset");
  if (output.empty()) return InvalidArgumentError("features: no output");
  if (batch < 1 || batch > 4096) return InvalidArgumentError("--batch must be in [1, 4096]");
  if (workers < 1 || workers > 256) return InvalidArgumentError("--workers must be in [1, 256]");
  if (shard_mib < 0.01 || shard_mib > 1 << 20) {
    return InvalidArgumentError("--shard-mib must be in [0.01, 1048576]");
  }
  return Status::Ok();
}

namespace {

// One split's clips as evaluation reads them, with the model's own data settings.
loader::LoaderOptions ClipsOf(const std::string& split, const ModelInfo& info,
                              const FeatureOptions& o) {
  loader::LoaderOptions l;
  l.split = split;
  l.batch_size = o.batch;
  l.plan.shuffle = false;
  l.plan.remainder = loader::Remainder::kPad;  // repeats are recognised by key and skipped
  l.clip = info.video.clip;
  l.clip.sampling = loader::ClipSampling::kCenter;
  l.clip.clips_per_video = 1;
  l.transform = info.video.transform;
  l.transform.train = false;
  l.transform.flip = false;
  l.threads = o.workers;
  return l;
}

// The model as a features manifest records it: a source another process can load again.
nlohmann::json ModelRecord(const ModelInfo& info, const std::string& config) {
  std::string source = info.source;
  if (!registry::IsModelUri(source)) {  // a run folder, checkpoint or file: local paths
    source = std::filesystem::absolute(source).lexically_normal().string();
  }
  nlohmann::json m = {{"name", info.name}, {"version", info.version}, {"source", source}};
  if (!config.empty()) m["config"] = std::filesystem::absolute(config).lexically_normal().string();
  return m;
}

class Extraction {
 public:
  Extraction(const FeatureOptions& o, const Model& model) : o_(o), model_(model) {}

  Result<FeatureSummary> Go() {
    REEL_RETURN_IF_ERROR(o_.Validate());
    REEL_RETURN_IF_ERROR(OpenStores());
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> splits, Splits());
    for (const std::string& split : splits) REEL_RETURN_IF_ERROR(ExtractSplit(split));
    REEL_RETURN_IF_ERROR(WriteManifest());
    summary_.output = out_->uri();
    return summary_;
  }

 private:
  Status OpenStores() {
    REEL_ASSIGN_OR_RETURN(in_, storage::OpenStore(o_.dataset));
    REEL_ASSIGN_OR_RETURN(std::string text, in_->Get(dataset::kManifestFileName));
    input_sha256_ = Sha256Hex(text);
    REEL_ASSIGN_OR_RETURN(input_, dataset::Manifest::Parse(text, in_->uri() + "/manifest.json"));
    if (input_.mode == dataset::DatasetMode::kFeatures) {
      return InvalidArgumentError(o_.dataset + " holds features already; give the dataset of " +
                                  "clips they came from");
    }
    REEL_ASSIGN_OR_RETURN(out_, storage::OpenStore(o_.output));
    auto existing = out_->Head(dataset::kManifestFileName);
    if (existing.ok()) {
      return FailedPreconditionError(out_->uri() +
                                     " already holds a dataset (manifest.json): remove it or "
                                     "write the features elsewhere");
    }
    if (existing.status().code() != StatusCode::kNotFound) return existing.status();
    keys_ = std::make_shared<dataset::KeyRegistry>();
    manifest_.name = input_.name + "-features";
    manifest_.mode = dataset::DatasetMode::kFeatures;
    manifest_.classes = input_.classes;  // AddSplit checks labels against them
    return Status::Ok();
  }

  Result<std::vector<std::string>> Splits() const {
    std::vector<std::string> splits = o_.splits;
    if (splits.empty()) {
      for (const auto& [name, info] : input_.splits) splits.push_back(name);
    }
    for (const std::string& s : splits) {
      if (!input_.splits.count(s)) {
        return NotFoundError("dataset " + in_->uri() + " has no split '" + s + "'");
      }
    }
    return splits;
  }

  Status ExtractSplit(const std::string& split) {
    REEL_ASSIGN_OR_RETURN(auto clips,
                          loader::Loader::Open(*in_, ClipsOf(split, model_.info(), o_)));
    dataset::ShardWriterOptions wo;
    wo.mode = dataset::DatasetMode::kFeatures;
    wo.target_bytes = static_cast<uint64_t>(o_.shard_mib * (1 << 20));
    wo.keys = keys_;
    REEL_ASSIGN_OR_RETURN(auto writer, dataset::ShardWriter::Create(*out_, "", split, wo));
    std::set<std::string> seen;  // the last batch is padded with repeats
    while (true) {
      REEL_ASSIGN_OR_RETURN(std::optional<loader::Batch> batch, clips->Next());
      if (!batch) break;
      const int64_t n = batch->shape[0];
      REEL_ASSIGN_OR_RETURN(Embeddings e, model_.Embed(batch->f32.data(), n, o_.layer));
      REEL_RETURN_IF_ERROR(CheckWidth(e.width));
      for (int64_t i = 0; i < n; ++i) {
        const std::string& key = batch->keys[static_cast<size_t>(i)];
        if (!seen.insert(key).second) continue;
        REEL_RETURN_IF_ERROR(
            writer->AddRecord(RecordOf(key, batch->labels[static_cast<size_t>(i)], e, i)));
      }
    }
    REEL_RETURN_IF_ERROR(writer->Finish());
    REEL_RETURN_IF_ERROR(manifest_.AddSplit(split, writer->shards()));
    summary_.splits.emplace_back(split, static_cast<int64_t>(writer->records()));
    summary_.records += static_cast<int64_t>(writer->records());
    Logger("features")->info("{}: {} embeddings of {} values", split, writer->records(), e_dim_);
    return Status::Ok();
  }

  Status CheckWidth(int64_t width) {
    if (e_dim_ == 0) e_dim_ = width;
    if (width < 1 || width != e_dim_) {
      return InternalError("the model gave embeddings of " + std::to_string(width) +
                           " values after " + std::to_string(e_dim_));
    }
    return Status::Ok();
  }

  dataset::Record RecordOf(const std::string& key, int label, const Embeddings& e,
                           int64_t row) const {
    dataset::Record r;
    r.key = key;
    r.label = label;
    r.label_name = input_.classes.at(static_cast<size_t>(label));
    r.payload_ext = "f32";
    const size_t bytes = static_cast<size_t>(e.width) * sizeof(float);
    r.payload.resize(bytes);
    std::memcpy(r.payload.data(), e.values.data() + row * e.width, bytes);  // little-endian
    r.metadata = {{"source_record", key}};
    return r;
  }

  Status WriteManifest() {
    manifest_.clip_settings = input_.clip_settings;
    manifest_.source_hash = input_sha256_;
    manifest_.features = {
        {"dim", e_dim_},         {"dtype", "float32"},
        {"layer", o_.layer},     {"model", ModelRecord(model_.info(), o_.model_config)},
        {"dataset", in_->uri()}, {"dataset_sha256", input_sha256_}};
    summary_.dim = e_dim_;
    return manifest_.Write(*out_, "");
  }

  const FeatureOptions& o_;
  const Model& model_;
  std::unique_ptr<storage::ObjectStore> in_, out_;
  dataset::Manifest input_, manifest_;
  std::string input_sha256_;
  std::shared_ptr<dataset::KeyRegistry> keys_;
  int64_t e_dim_ = 0;
  FeatureSummary summary_;
};

}  // namespace

Result<FeatureSummary> ExtractFeatures(const FeatureOptions& options, const Model& model) {
  return Extraction(options, model).Go();
}

}  // namespace reel::serve
